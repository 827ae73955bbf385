"""The triton backend: its kernel against `naive` at shapes of several blocks (the kit's cells fit in
one), the masks it reads as parameters (inside a model too), and its refusals without a GPU, an
interpreter or Triton.

Tests marked `triton_interpreter` run it under Triton's interpreter (tests/conftest.py); the rest
of the suite runs without it, as a user's shell does."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from andrea.attention import (
    Causal,
    Document,
    KeyPadding,
    Mask,
    MultiHeadSelfAttention,
    NoMask,
    PrefixLM,
    SlidingWindow,
    UnsupportedAttentionError,
    get_backend,
)
from andrea.attention.backends import triton as triton_backend
from andrea.attention.backends import triton_ops, triton_tiles
from andrea.attention.masks import MaskParams
from andrea.attention.positions import ALiBi
from andrea.models.gpt import GPT
from andrea.testing.formula import assert_close

BATCH, T, D = 2, 37, 8  # 37 keys: three 16-wide blocks, the last one partial


def masks() -> dict[str, Mask | None]:
    lengths = torch.tensor([T - 9, 20])
    docs = torch.tensor([[0] * 10 + [1] * 20 + [2] * (T - 30), [0] * 30 + [1] * (T - 30)])
    return {
        "none": None,
        "causal": Causal(),
        "window": SlidingWindow(5),
        "band": SlidingWindow(4, causal=False),
        "prefix": PrefixLM(20),
        "causal&padding": Causal() & KeyPadding(lengths),
        "causal&document": Causal() & Document(docs),
        "window|document": SlidingWindow(3) | Document(docs),  # read as a dense mask
    }


MASKS = masks()


HEADS = {"mha": (4, 4), "gqa": (4, 2), "mqa": (4, 1)}
QUERIES = {"square": T, "decode": 5}
# the default run: every mask the kernel reads as parameters, over several blocks (the kit's cells take no-mask,
# the dense path and decode shapes at one block); every other case under -m slow
# (causal and the window also reach the kernel inside a GPT, below; the others run under -m slow)
DEFAULT = {(mask, "gqa", "square") for mask in ("causal&padding", "causal&document")}  # a composed mask each way
CASES = [  # the interpreter is slow: the DEFAULT cases in the default run, every other one under -m slow
    pytest.param(case, id="-".join(case), marks=() if case in DEFAULT else pytest.mark.slow)
    for case in ((mask, heads, queries) for mask in MASKS for heads in HEADS for queries in QUERIES)
]


def matches_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None, mask_name: str) -> None:
    """triton's output and q, k, v gradients equal naive's."""
    ref = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, _ = get_backend("triton")(q, k, v, mask)
    expected, _ = get_backend("naive")(ref[0], ref[1], ref[2], mask)
    assert_close(out, expected, torch.float32, f"triton x {mask_name}: output differs")
    grad = torch.randn_like(out)
    out.backward(grad), expected.backward(grad)
    for name, got, want in zip("qkv", (q, k, v), ref, strict=True):
        assert got.grad is not None and want.grad is not None
        assert_close(got.grad, want.grad, torch.float32, f"triton x {mask_name}: d{name} differs")


@pytest.mark.triton_interpreter
@pytest.mark.parametrize("case", CASES)
def test_matches_naive_forward_and_backward_over_several_blocks(case):
    mask_name, heads, queries = case
    mask = MASKS[mask_name]
    (n_head, n_kv_head), queries = HEADS[heads], QUERIES[queries]
    torch.manual_seed(0)
    q = torch.randn(BATCH, n_head, queries, D, requires_grad=True)
    k = torch.randn(BATCH, n_kv_head, T, D, requires_grad=True)
    v = torch.randn(BATCH, n_kv_head, T, D, requires_grad=True)
    matches_naive(q, k, v, mask, mask_name)


LONG = 100  # keys: six 16-wide blocks and a partial one, so that whole blocks lie inside every mask's range
WHOLE_BLOCK_MASKS = {  # each has blocks seen whole (run with no mask) and edge blocks around them
    "causal": Causal(),
    "window": SlidingWindow(40),
    "band": SlidingWindow(40, causal=False),
    "prefix": PrefixLM(50),
    "causal&padding": Causal() & KeyPadding(torch.tensor([LONG - 20, 70])),
}


WHOLE_CASES = [  # d = 16 fills the interpreter's tile (whole blocks load with no predicate), d = 12 does not
    pytest.param(name, d, id=f"{name}-d={d}") for name in WHOLE_BLOCK_MASKS for d in (16, 12)
]


@pytest.mark.slow(reason="the interpreter, 3-5 s a mask; the default run skips whole blocks inside a GPT with a window")
@pytest.mark.triton_interpreter
@pytest.mark.parametrize(("mask_name", "head_dim"), WHOLE_CASES)
def test_blocks_seen_whole_run_without_the_mask_and_match_naive(mask_name, head_dim):
    """Every block between a query tile's first and last key that all its rows see whole skips the mask (and,
    where d fills the tile, the load predicates): forward and backward still equal naive's."""
    mask = WHOLE_BLOCK_MASKS[mask_name]
    torch.manual_seed(0)
    q, k, v = (torch.randn(BATCH, 2, LONG, head_dim, requires_grad=True) for _ in range(3))
    matches_naive(q, k, v, mask, mask_name)


UNEQUAL_TILES = {  # each kernel its own tiles, BLOCK_M != BLOCK_N both ways, as a GPU's d = 256 runs them
    "forward": dict(BLOCK_M=32, BLOCK_N=16, BLOCK_D=16),
    "dq": dict(BLOCK_M=16, BLOCK_N=32, BLOCK_D=16),
    "dkdv": dict(BLOCK_M=32, BLOCK_N=16, BLOCK_D=16),
    "delta": dict(BLOCK_M=32, BLOCK_D=16),  # rows other than dq's: its grid follows its own
}
UNEQUAL_MASKS = {  # whole blocks and edge blocks under each, or (documents) edge blocks only
    **{name: WHOLE_BLOCK_MASKS[name] for name in ("causal", "window", "band", "prefix")},
    "causal&document": Causal() & Document(torch.tensor([[0] * 30 + [1] * 45 + [2] * 25, [0] * 60 + [1] * 40])),
}


UNEQUAL_CASES = [  # the default run keeps causal's square M>N cell; the rest under -m slow
    pytest.param(name, queries, transposed, id=f"{name}-{shape}-{order}",
                 marks=() if (name, shape, order) == ("causal", "square", "M>N") else pytest.mark.slow)
    for name in UNEQUAL_MASKS
    for queries, shape in ((LONG, "square"), (5, "decode"))
    for transposed, order in ((False, "M>N"), (True, "M<N"))
]  # fmt: skip


@pytest.mark.triton_interpreter
@pytest.mark.parametrize(("mask_name", "queries", "transposed"), UNEQUAL_CASES)
def test_each_kernel_s_own_unequal_tiles_match_naive(mask_name, queries, transposed, monkeypatch):
    """The ranges of blocks to visit and of blocks seen whole hold when a kernel's query and key tiles differ,
    and when the forward, dq and dk/dv each launch with their own (the grids follow each kernel's tiles)."""
    tiles = {name: dict(t, BLOCK_M=t["BLOCK_N"], BLOCK_N=t["BLOCK_M"]) if transposed and "BLOCK_N" in t else t
             for name, t in UNEQUAL_TILES.items()}  # fmt: skip
    monkeypatch.setattr(triton_tiles, "_block_sizes", lambda *args, **kwargs: tiles)
    torch.manual_seed(0)
    q = torch.randn(BATCH, 4, queries, 16, requires_grad=True)
    k, v = (torch.randn(BATCH, 2, LONG, 16, requires_grad=True) for _ in range(2))
    matches_naive(q, k, v, UNEQUAL_MASKS[mask_name], mask_name)


@pytest.mark.triton_interpreter
@pytest.mark.slow(reason="the interpreter over a long sequence (7 s); a GPT's fused views train in the default run")
@pytest.mark.parametrize("mask_name", ["causal", "causal&document"])
def test_views_of_a_fused_projection_are_read_in_place_and_match_naive(mask_name):
    """q, k and v as a model makes them (transposed views of one fused (B, T, 3, H, d) projection) and a
    transposed output gradient are read through their strides, with no copy: forward and backward equal
    naive's on contiguous copies."""
    torch.manual_seed(0)
    fused = torch.randn(BATCH, LONG, 3, 4, 16, requires_grad=True)
    q, k, v = (part.transpose(1, 2) for part in fused.unbind(2))  # (B, H, T, d), rows 3·H·d apart
    assert not q.is_contiguous() and triton_ops._rows_apart(q) is q  # read in place
    mask = UNEQUAL_MASKS[mask_name]
    out, _ = get_backend("triton")(q, k, v, mask)
    ref = [t.detach().contiguous().requires_grad_() for t in (q, k, v)]
    expected, _ = get_backend("naive")(ref[0], ref[1], ref[2], mask)
    assert_close(out, expected, torch.float32, f"triton x {mask_name} on views: output differs")
    grad = torch.randn(BATCH, LONG, 4, 16)  # (B, T, H, d): out's gradient arrives as its transposed view
    (out.transpose(1, 2) * grad).sum().backward()
    expected.backward(grad.transpose(1, 2))
    assert fused.grad is not None
    for name, got, want in zip("qkv", fused.grad.unbind(2), ref, strict=True):
        assert want.grad is not None
        assert_close(got.transpose(1, 2), want.grad, torch.float32, f"triton x {mask_name} on views: d{name} differs")


@pytest.mark.triton_interpreter
def test_alibi_over_several_blocks_and_weights_through_the_probe():
    torch.manual_seed(0)
    q, k, v = (torch.randn(BATCH, 4, T, D) for _ in range(3))
    out, weights = get_backend("triton")(q, k, v, Causal(), score_mod=ALiBi(4), need_weights=True)
    expected, expected_weights = get_backend("naive")(q, k, v, Causal(), score_mod=ALiBi(4), need_weights=True)
    assert_close(out, expected, torch.float32, "triton + alibi: output differs")
    assert weights is not None and expected_weights is not None
    assert_close(weights, expected_weights, torch.float32, "triton + alibi: weights differ")


def fields(params):
    return (params.causal, params.prefix, params.window, params.band)


def test_masks_say_themselves_as_kernel_parameters():
    docs, lengths = torch.zeros(1, 4, dtype=torch.long), torch.tensor([4])
    assert fields(Causal().params()) == (True, 0, None, False)
    assert fields(PrefixLM(3).params()) == (True, 3, None, False)
    assert fields(SlidingWindow(5).params()) == (True, 0, 5, False)
    assert fields(SlidingWindow(5, causal=False).params()) == (False, 0, 5, True)
    packed = (Causal() & Document(docs) & KeyPadding(lengths)).params()
    assert packed is not None
    assert packed.causal and packed.document_ids is docs and packed.lengths is lengths
    assert fields(NoMask().params()) == fields(MaskParams())
    assert fields((Causal() & SlidingWindow(3)).params()) == (True, 0, 3, False)  # the window's causal half
    assert fields((Causal() & SlidingWindow(3, causal=False)).params()) == (True, 0, 3, False)
    assert fields((Causal() & PrefixLM(2)).params()) == (True, 0, None, False)  # plain causal is left
    assert (SlidingWindow(3) | Document(docs)).params() is None  # the kernel reads its dense form
    assert (SlidingWindow(3) & SlidingWindow(2)).params() is None
    assert (KeyPadding(lengths) & KeyPadding(lengths)).params() is None


class Launches:
    """Records every launch's constexpr flags and window (its last scalar: S + 1 when unbounded), through
    the backend's own argument builder."""

    def __init__(self, monkeypatch):
        self.flags: list[dict[str, Any]] = []
        self.windows: list[object] = []
        build = triton_ops._kernel_args

        def spy(*args, **kwargs):
            positional, constexprs = build(*args, **kwargs)
            self.flags.append(constexprs)
            self.windows.append(positional[-1])
            return positional, constexprs

        monkeypatch.setattr(triton_ops, "_kernel_args", spy)


@pytest.mark.triton_interpreter
@pytest.mark.parametrize(
    "mask",  # a GPT trained under the interpreter (3 s): the composed mask in the default run, its parts under -m slow
    [
        pytest.param("causal", marks=pytest.mark.slow),
        pytest.param("sliding_window(window=5)", marks=pytest.mark.slow),
        "causal & sliding_window(window=5)",
    ],
)
def test_inside_a_gpt_the_mask_reaches_the_kernel_as_parameters_and_it_trains(mask, monkeypatch):
    """The block wraps its static mask in a precomputed buffer: the kernel still gets the parameters
    (CAUSAL, a window, no dense tile), so it skips the key blocks they rule out; and the GPT learns."""
    launches = Launches(monkeypatch)
    torch.manual_seed(0)
    attention = {"backend": "triton", "n_head": 2, "mask": mask}
    net = GPT(vocab_size=16, max_context=40, n_layer=1, d_model=16, attention=attention)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.3)
    idx = torch.randint(16, (2, 37))
    losses = []
    for _ in range(3):
        logits, _ = net(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert launches.flags and all(flags["CAUSAL"] and not flags["HAS_DENSE"] for flags in launches.flags)
    assert set(launches.windows) == {37 if mask == "causal" else 5}  # 36 keys: unbounded is S + 1


@pytest.mark.triton_interpreter
def test_a_block_s_causal_mask_and_the_batch_s_documents_reach_the_kernel_together(monkeypatch):
    launches = Launches(monkeypatch)
    block = MultiHeadSelfAttention(16, 2, backend="triton", mask="causal", max_context=40)
    reference = MultiHeadSelfAttention(16, 2, backend="naive", mask="causal", max_context=40)
    reference.load_state_dict(block.state_dict())
    docs = Document(torch.tensor([[0] * 10 + [1] * 20 + [2] * (T - 30), [0] * 30 + [1] * (T - 30)]))
    x = torch.randn(2, T, 16)
    with torch.no_grad():
        assert_close(block(x, mask=docs)[0], reference(x, mask=docs)[0], torch.float32, "causal & documents")
    (flags,) = launches.flags
    assert flags["CAUSAL"] and flags["HAS_DOCS"] and not flags["HAS_DENSE"]


@pytest.mark.triton_interpreter
def test_a_fully_masked_sequence_gives_zeros_and_zero_gradients():
    q, k, v = (torch.randn(2, 2, 20, D, requires_grad=True) for _ in range(3))
    out, _ = get_backend("triton")(q, k, v, Causal() & KeyPadding(torch.tensor([20, 0])))
    assert torch.isfinite(out).all() and (out[1] == 0).all()
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() and (t.grad[1] == 0).all() for t in (q, k, v))


def _without(env_key: str) -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != env_key}


@pytest.mark.slow  # reason: a fresh interpreter importing torch and Triton (3 s)
def test_on_cpu_without_the_interpreter_it_is_refused_in_one_line():
    code = (
        "import torch\nfrom andrea.attention import get_backend\n"
        "q = torch.randn(1, 2, 4, 8)\nget_backend('triton')(q, q, q)\n"
    )
    env = _without("TRITON_INTERPRET")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "attention backend 'triton' runs on CUDA GPUs" in last and "TRITON_INTERPRET=1" in last
    assert re.search(r"use attention backend (\w+ / )*eager / (\w+ / )*sdpa", last), last  # + any plugin


@pytest.mark.slow  # reason: a fresh interpreter importing torch (3 s)
def test_without_triton_it_is_listed_with_the_reason_and_refused_with_the_install_command():
    code = (
        "import sys\nsys.modules['triton'] = None  # as if it were not installed\n"
        "import torch\nfrom andrea.attention import backend_registry, get_backend\n"
        "assert 'triton' in backend_registry.names()\n"
        "print(backend_registry.load('triton').capabilities.unavailable)\n"
        "q = torch.randn(1, 2, 4, 8)\nget_backend('triton')(q, q, q)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stdout.startswith("Triton is not installed; pip install 'andrea[triton]'")
    last = done.stderr.strip().splitlines()[-1]
    assert "attention backend 'triton' cannot run here: Triton is not installed; pip install" in last


@pytest.mark.slow(reason="andrea-train as a subprocess (~10 s)")
def test_andrea_train_with_triton_on_a_cpu_is_refused_in_one_line(tmp_path):
    script = str(Path(sys.executable).with_name("andrea-train"))
    env = _without("TRITON_INTERPRET")
    done = subprocess.run([script, "attention=triton"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("andrea-train: error: attention=triton: attention backend 'triton' runs on CUDA GPUs")
    assert re.search(r"use attention backend (\w+ / )*eager / ", lines[0]) and "or a GPU (trainer=gpu)" in lines[0]
    assert not list(tmp_path.iterdir()) or not list(tmp_path.rglob("*.ckpt"))  # refused before any work


KERNEL_REPORT = Path(__file__).resolve().parents[2] / "scripts" / "kernel_report.py"
HOPPER_VARIANTS = [  # every variant the backend accepts on a GPU, as scripts/kernel_report.py lists them
    (dtype, head_dim, mask)
    for dtype, head_dims in (("bf16", (64, 128, 256)), ("fp32", (64,)))
    for head_dim in head_dims
    for mask in ("causal", "every-input", "softcap", "sigmoid")
]  # fmt: skip


# Kernels whose tiles cannot be on wgmma, measured here: bf16 d = 256's dk/dv, whose 16 keys (the dots' M side)
# are under wgmma's 64 rows; 64 keys spill 56-176 bytes (docs/kernel_report.md). Not to be added to.
def test_the_kernel_report_asks_the_installed_triton_for_its_ptxas(monkeypatch):
    """scripts/kernel_report.py finds ptxas as each Triton release names it (3.9: get_ptxas(arch) giving a tool;
    some: a (path, version) pair; older: get_ptxas() or _path_to_binary), never by a path of its own."""
    from types import SimpleNamespace

    from triton.backends.nvidia import compiler

    monkeypatch.syspath_prepend(str(KERNEL_REPORT.parent))
    from kernel_report import ptxas_path  # type: ignore[import-not-found]  # scripts/ is no package

    assert os.access(ptxas_path(90), os.X_OK)  # this machine's Triton: a real binary
    for lookup in (
        lambda arch: SimpleNamespace(path=f"/tool/{arch}"),
        lambda arch: (f"/tool/{arch}", "12.8"),
        lambda: SimpleNamespace(path="/tool/any"),
    ):
        monkeypatch.setattr(compiler, "get_ptxas", lookup, raising=False)
        assert ptxas_path(90) in ("/tool/90", "/tool/any")
    monkeypatch.delattr(compiler, "get_ptxas")
    monkeypatch.setattr(compiler, "_path_to_binary", lambda name: (f"/old/{name}", "12.4"), raising=False)
    assert ptxas_path(90) == "/old/ptxas"


NO_WGMMA = {("bf16", 256, mask, "attention_backward_dkdv") for mask in ("causal", "every-input", "softcap", "sigmoid")}


@pytest.mark.slow
@pytest.mark.parametrize("case", HOPPER_VARIANTS, ids=["-".join(map(str, case)) for case in HOPPER_VARIANTS])
def test_every_accepted_kernel_compiles_for_a_hopper_gpu_and_fits_its_shared_memory(case):
    """Triton lowers the kernels to sm_90 (an H100 / H200) as a real launch specialises them (divisibility hints
    on pointers and sizes): no GPU needed to compile. None spills a register. The three attention kernels fit
    Hopper's 227 KB of shared memory per block, copy asynchronously (cp.async), run 16-bit tiles on the tensor
    cores (wgmma, but NO_WGMMA), and with causal parameters (any mechanism) have an inner-loop path that masks
    no score: the forward's loop over whole blocks, the backward's path past the mask's branch."""
    env = _without("TRITON_INTERPRET")
    done = subprocess.run(
        [sys.executable, str(KERNEL_REPORT), "--json", *map(str, case)], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["kernel"]: row for row in map(json.loads, done.stdout.splitlines())}
    pre_pass = rows.pop("attention_backward_delta")  # δ's: elementwise, no loop, no tile to copy ahead
    assert pre_pass["spills"] == 0 and pre_pass["shared"] <= 227 * 1024, pre_pass
    assert set(rows) == {"attention_forward", "attention_backward_dq", "attention_backward_dkdv"}
    for name, row in rows.items():
        assert 0 < row["shared"] <= 227 * 1024, (name, row["shared"])
        assert row["async_copies"] > 0, name  # the loop pipelined: the next tiles copied while this one computes
        assert row["wgmma"] > 0 or case[0] == "fp32" or (*case, name) in NO_WGMMA, name  # 16-bit: Hopper's tensor cores
        assert row["spills"] == 0, (name, row["spills"])
        if case[2] != "every-input":  # per inner loop: (compares, -inf selects) on its fastest path, and over it all
            fastest = min(row["loops"], key=lambda loop: (loop[1], loop[0]))
            assert fastest[1] == 0, (name, row["loops"])  # a path that masks no score
            assert fastest[0] < max(loop[2] for loop in row["loops"]), (name, row["loops"])  # the edges compare


DECODE_VARIANTS = [("bf16", 64), ("bf16", 128), ("bf16", 256), ("fp32", 64)]


@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "head_dim"), DECODE_VARIANTS, ids=[f"{t}-{d}" for t, d in DECODE_VARIANTS])
def test_the_decoding_forward_compiles_for_a_hopper_gpu_with_no_spill(dtype, head_dim):
    """The forward of one query (decoding from a KV cache) on its own 16-row tiles, compiled for sm_90 as a
    launch at T = 1 specialises it: no spill, under 227 KB, pipelined, and a loop over whole key blocks that
    masks no score."""
    done = subprocess.run(
        [sys.executable, str(KERNEL_REPORT), "--json", dtype, str(head_dim), "decode"], capture_output=True,
        text=True, env=_without("TRITON_INTERPRET"), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = map(json.loads, done.stdout.splitlines())
    assert row["kernel"] == "attention_forward" and row["tile"].startswith("16x"), row
    assert row["spills"] == 0 and 0 < row["shared"] <= 227 * 1024 and row["async_copies"] > 0, row
    assert min(loop[1] for loop in row["loops"]) == 0, row["loops"]  # the whole blocks' loop: no -inf select


def test_a_forward_of_a_few_queries_runs_16_rows_and_the_rest_keeps_its_tiles():
    cuda = torch.device("cuda")  # a device object only: nothing runs
    for dtype in (torch.bfloat16, torch.float32):
        prompt = triton_tiles._block_sizes(64, dtype, cuda, queries=triton_tiles.DECODE_QUERIES + 1)
        decode = triton_tiles._block_sizes(64, dtype, cuda, queries=1)
        assert decode["forward"]["BLOCK_M"] == 16 and decode["forward"]["num_warps"] == 4
        assert prompt["forward"]["BLOCK_M"] > 16
        assert (decode["dq"], decode["dkdv"]) == (prompt["dq"], prompt["dkdv"])  # generation runs no backward


def test_the_grid_puts_the_blocks_on_its_first_axis_up_to_a_million_keys_at_head_dim_256():
    """dk/dv at head_dim 256 takes 16 keys a program: a million keys are 65,536 blocks, one more than a grid's
    second axis takes. The blocks go on the first axis (2^31 - 1), the sequence-heads on the second; past
    what that takes, one line refuses the call."""
    cuda = torch.device("cuda")  # a device object only: nothing runs
    tiles = triton_tiles._block_sizes(256, torch.bfloat16, cuda)
    keys, heads = 2**20, 2 * 16  # (batch, heads)
    blocks, sequence_heads = triton_ops.launch_grid(keys, tiles["dkdv"]["BLOCK_N"], heads)
    assert blocks == keys // 16 == 65_536 > 65_535 and sequence_heads == heads
    for name in ("forward", "dq", "delta"):
        grid = triton_ops.launch_grid(keys, tiles[name]["BLOCK_M"], heads)
        assert grid[0] <= 2**31 - 1 and grid[1] <= 65_535, name
    assert triton_ops.launch_grid(1, 64, 1) == (1, 1)
    with pytest.raises(UnsupportedAttentionError, match=r"^attention backend 'triton' launches one program .*65535"):
        triton_ops.launch_grid(4096, 64, 65_536)


@pytest.mark.triton_interpreter
def test_a_window_at_the_int32_edge_is_no_window_for_the_kernels():
    """sliding_window(window=2^31 - 1) sees every earlier key, as causal does: its window reaches the kernels
    clamped to the context (unclamped, q - k < window wrapped in int32 and dk = dv = 0)."""
    q, k, v = (torch.randn(1, 2, T, D, requires_grad=True) for _ in range(3))
    edge = Causal() & SlidingWindow(2**31 - 1)
    _, ints, _ = triton_ops._mask_inputs(q, k, edge, None)
    assert ints[-2:] == [0, T + 1]  # the prefix, the window: S + 1, what no window gives
    _, ints, _ = triton_ops._mask_inputs(q, k, PrefixLM(2**31 - 1), None)
    assert ints[-2] == T  # a prefix past the keys: all of them
    matches_naive(q, k, v, edge, "causal & sliding_window(window=2147483647)")  # output and dq, dk, dv


def test_tiles_are_hopper_s_there_and_two_stages_at_most_on_an_older_gpu():
    """TILES are sized to Hopper's 227 KB of shared memory per block: a GPU before it (an A100's 163 KB, a
    consumer card's 99 KB) gets the same tiles with 2 stages at most, where 3 would not fit."""
    cuda = torch.device("cuda")  # a device object only: nothing runs
    for head_dim in (64, 128, 256):
        hopper = triton_tiles._block_sizes(head_dim, torch.bfloat16, cuda)
        older = triton_tiles._block_sizes(head_dim, torch.bfloat16, cuda, "softmax", (8, 6))
        assert max(tiles["num_stages"] for tiles in hopper.values()) == 3
        assert all(tiles["num_stages"] <= 2 for tiles in older.values())
        for name in ("forward", "dq", "dkdv"):
            assert {**older[name], "num_stages": 0} == {**hopper[name], "num_stages": 0}  # the same tiles


def test_float32_past_head_dim_64_is_refused_on_a_gpu_before_any_launch(monkeypatch):
    """Its tiles would not fit a GPU's shared memory; the refusal names bfloat16. (A CUDA tensor is faked by
    its device attribute: the refusal comes before the kernel is touched.)"""

    class OnCuda(torch.Tensor):
        @property
        def device(self):  # type: ignore[override]  # a read-only fake of torch's writable attribute, on purpose
            return torch.device("cuda")

    q = torch.randn(1, 2, 4, 128).as_subclass(OnCuda)
    with pytest.raises(UnsupportedAttentionError, match="takes float32 up to head_dim 64 on a GPU, got 128 .*bfloat16"):
        triton_backend.TritonBackend().forward(q, q, q, mask=None, scale=1.0, need_weights=False)


@pytest.mark.slow  # reason: dynamo traces a GPT and runs it compiled, forward and backward, under the interpreter (6 s)
@pytest.mark.triton_interpreter
def test_torch_compile_traces_a_gpt_through_the_kernel_without_a_graph_break():
    """The kernels are torch operators (andrea::triton_attention and its backward) with shape-only fake
    versions: dynamo records each attention as one node, so the whole GPT is one graph, and the compiled
    model's output and gradients are the eager model's."""
    torch.manual_seed(0)
    attention = {"backend": "triton", "n_head": 2, "mask": "causal & sliding_window(window=5)"}
    net = GPT(vocab_size=16, max_context=40, n_layer=2, d_model=16, attention=attention)
    idx = torch.randint(16, (2, 20))
    explained = torch._dynamo.explain(net)(idx)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(net, backend="aot_eager", fullgraph=True)  # fullgraph: a break would raise
    grads = []
    for model in (net, compiled):
        net.zero_grad()
        logits, _ = model(idx)
        logits.square().mean().backward()
        grads.append([p.grad.clone() for p in net.parameters() if p.grad is not None])
    assert_close(compiled(idx)[0], net(idx)[0], torch.float32, "compiled logits")
    for eager, traced in zip(*grads, strict=True):
        assert_close(traced, eager, torch.float32, "compiled gradients")
