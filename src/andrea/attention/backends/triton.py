"""triton: andrea's own FlashAttention-2 kernel (flash_kernels.py), forward and backward.

One launch computes every (batch, head): the kernels' grid is (query block, B x H), the long dimension on the
first axis, which takes 2^31 - 1 programs where the others take 65,535 (`launch_grid`). The mask
never becomes a matrix when its parameters (`Mask.params()`, andrea.attention.masks.params) say
it all: causal, sliding window, prefix-LM and none, alone, wrapped in a module's precomputed
buffer, or joined with `&` to each other, key padding and packed documents, reach the kernel as
a few numbers and two small tensors (lengths (B,), document ids (B, S)), and key blocks they
rule out are skipped. Any other mask (an `|` combination, a plugin's without params) reaches it
as its dense (B|1, H|1, T, S) form, read a tile at a time. ALiBi is a score bias computed in the kernel from
the per-head slopes; grouped heads read their shared k and v in place. Mechanisms: softmax, and softcap
(cap · tanh(s / cap) on the scores, the cap compiled in), and sink (each row's output scaled by
Z / (Z + exp(sink)) from the kernel's log-sum-exp Z, its gradient through lse), and sigmoid (each
weight sigmoid(s + bias) on its own, the bias compiled in). The kernels are torch operators
(`andrea::triton_attention` and its backward, with shape-only fake versions and autograd registered), so
torch.compile traces a model through attention as one node each, with no graph break.

Runs on CUDA GPUs. CPU tensors run the same kernels under Triton's interpreter while
TRITON_INTERPRET=1 is set (read at each call), slowly: that is how its tests run. Without Triton installed it stays
registered, its capabilities say why it cannot run, and every call is refused with the install
command.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from andrea.attention.advice import _alternatives
from andrea.attention.contract import AttentionBackend, Capabilities, UnsupportedAttentionError
from andrea.attention.masks import Mask, MaskParams
from andrea.attention.mechanisms import Mechanism, Sigmoid, Sink, Softcap
from andrea.attention.positions import ALiBi, ScoreMod
from andrea.attention.positions.alibi import alibi_slopes

INSTALL = "pip install 'andrea[triton]' (from a clone: pip install -e '.[triton]')"
INTERPRETER = "TRITON_INTERPRET"  # =1: CPU tensors run the kernels under Triton's interpreter
MAX_HEAD_DIM = 256
# the mechanisms' kernels it runs (andrea.attention.mechanisms): softcap and sigmoid in the kernels, sink after them
KERNELS = frozenset({"softmax", "softcap", "sink", "sigmoid"})
FLOAT32_MAX_HEAD_DIM = 64  # on a GPU: float32 tiles of a wider head do not fit in shared memory

try:
    import triton  # noqa: F401  # an optional extra
except ImportError:
    TRITON_INSTALLED = False
else:
    TRITON_INSTALLED = True


def interpreter_on() -> bool:
    """Whether CPU tensors may run the kernels under Triton's interpreter now (the variable is read per call)."""
    return os.environ.get(INTERPRETER) == "1"


def _language_interpreted() -> bool:
    """Whether Triton's own library functions (tl.zeros, tl.sum, ...) were defined for the interpreter: Triton
    decides that once, when it is first imported, from the same variable."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.zeros, InterpretedFunction)


@functools.cache
def kernels(interpreted: bool) -> ModuleType:
    """flash_kernels compiled for a GPU, or the same source under Triton's interpreter (for CPU tensors):
    Triton decides between the two when a module's kernels are defined, so each is its own module object."""
    spec = importlib.util.find_spec("andrea.attention.backends.flash_kernels")
    assert spec is not None and spec.loader is not None
    if not interpreted:
        return importlib.import_module(spec.name)
    module = importlib.util.module_from_spec(spec)
    before = os.environ.get(INTERPRETER)
    os.environ[INTERPRETER] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if before is None:
            del os.environ[INTERPRETER]
        else:
            os.environ[INTERPRETER] = before
    return module


@functools.cache
def _slopes(n_head: int, device: torch.device) -> Tensor:
    """ALiBi's per-head slopes on the device, made once: no host-to-device copy per call."""
    return torch.tensor(alibi_slopes(n_head), device=device, dtype=torch.float32)


# Each kernel's (BLOCK_M, BLOCK_N, num_warps, num_stages) on a GPU, by input width and BLOCK_D (d <= 64 as 64):
# the largest tiles, then the most stages, that compile for sm_90 with no register spilled and on the tensor
# cores' wgmma where a tile can be (scripts/kernel_report.py, docs/kernel_report.md; tests/attention/
# test_triton_backend.py holds every variant to it). dk/dv computes k qᵀ: its key tile is the dots' M side.
TILES = {
    ("16-bit", 64): dict(forward=(128, 64, 8, 3), dq=(64, 64, 4, 3), dkdv=(32, 128, 8, 3)),
    ("16-bit", 128): dict(forward=(64, 64, 8, 3), dq=(64, 64, 8, 3), dkdv=(32, 64, 8, 3)),
    # d = 256: dk/dv's 16 keys are under wgmma's 64 rows (mma instead; 64 keys spill 56-176 bytes)
    ("16-bit", 256): dict(forward=(64, 32, 8, 3), dq=(64, 16, 8, 3), dkdv=(64, 16, 8, 2)),
    ("float32", 64): dict(forward=(32, 32, 4, 3), dq=(32, 32, 4, 2), dkdv=(16, 32, 4, 3)),  # tf32x3: 3 dots each
}
MECHANISM_TILES = {  # where a mechanism's kernel compiles better with tiles of its own
    ("sigmoid", "float32", 64): dict(dkdv=(16, 64, 4, 2)),  # 32 keys: Triton does not pipeline its loop
}
HOPPER = (9, 0)  # TILES' GPU; an older one (99-163 KB of shared memory per block, not 227) runs 2 stages at most
# A forward of at most DECODE_QUERIES queries (decoding from a KV cache: one) runs DECODE_TILES, 16 rows on 4 warps
# (mma): the rows of a 64- or 128-row tile past them would be computed for nothing, where decoding is bound by
# reading k and v; no spill at any head_dim (the kernel report's decode rows)
DECODE_QUERIES = 16
DECODE_TILES = {"16-bit": (16, 64, 4, 3), "float32": (16, 32, 4, 3)}


@functools.cache
def _capability(device: torch.device) -> tuple[int, int]:
    """The CUDA device's compute capability, read once per device."""
    return torch.cuda.get_device_capability(device)


def _block_sizes(
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    kernel: str = "softmax",
    capability: tuple = HOPPER,
    queries: int | None = None,
) -> dict[str, dict]:
    """Each kernel's tiles and launch options, {"forward", "dq", "dkdv", "delta"}: TILES on a GPU (float32 only
    up to FLOAT32_MAX_HEAD_DIM; before Hopper with 2 stages at most; a forward of DECODE_QUERIES queries or fewer
    on 16 rows), 16 x 16 under the interpreter (small tiles keep the tests quick); δ's pre-pass (no loop, no
    dot) dq's rows on Triton's default 4 warps."""
    block_d = _block_d(head_dim)
    if device.type == "cpu":
        tiles = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_D=block_d)
        return dict(forward=tiles, dq=tiles, dkdv=tiles, delta=dict(BLOCK_M=16, BLOCK_D=block_d))
    width = "float32" if dtype == torch.float32 else "16-bit"
    chosen = TILES[width, max(64, block_d)] | MECHANISM_TILES.get((kernel, width, max(64, block_d)), {})
    if queries is not None and queries <= DECODE_QUERIES:
        chosen = chosen | dict(forward=DECODE_TILES[width])
    most = 3 if tuple(capability) >= HOPPER else 2
    sizes = {
        name: dict(BLOCK_M=m, BLOCK_N=n, BLOCK_D=block_d, num_warps=warps, num_stages=min(stages, most))
        for name, (m, n, warps, stages) in chosen.items()
    }
    return sizes | dict(delta=dict(BLOCK_M=sizes["dq"]["BLOCK_M"], BLOCK_D=block_d, num_warps=4, num_stages=most))


def _tiles_for(q: Tensor, kernel: str) -> dict[str, dict]:
    """`_block_sizes` for a call's q on its own device."""
    capability = _capability(q.device) if q.device.type == "cuda" else HOPPER
    return _block_sizes(q.shape[-1], q.dtype, q.device, kernel, capability, queries=q.shape[2])


def _block_d(head_dim: int) -> int:
    """The tiles' width: head_dim padded to a power of two, at least 16 (a tensor-core dot's least)."""
    return max(16, 1 << (head_dim - 1).bit_length())


FLAGS = ("CAUSAL", "BAND", "HAS_ALIBI", "HAS_LENGTHS", "HAS_DOCS", "HAS_DENSE")  # the kernels' mask switches


def _mask_inputs(
    q: Tensor, k: Tensor, mask: Mask | None, score_mod: ScoreMod | None
) -> tuple[list[Tensor], list[int], list[bool]]:
    """What the mask and the score bias become for the kernels, as an op takes them: (tensors: ALiBi's slopes,
    the lengths, the document ids, the dense form; integers: the dense form's strides, the prefix, the window;
    the FLAGS)."""
    B, H, T, d = q.shape
    S = k.shape[2]
    params, dense = MaskParams() if mask is None else mask.params(), None
    if params is None:  # a mask its parameters cannot say: the kernel reads its dense form, a tile at a time
        assert mask is not None
        dense = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device).to(torch.int8).contiguous()
        params = MaskParams()
    empty_i = torch.empty(1, dtype=torch.int64, device=q.device)
    lengths = empty_i if params.lengths is None else params.lengths.to(q.device, torch.int64).contiguous()
    docs = empty_i if params.document_ids is None else params.document_ids.to(q.device, torch.int64).contiguous()
    slopes = _slopes(score_mod.n_head, q.device) if isinstance(score_mod, ALiBi) else empty_i.float()
    dense_strides = [0, 0, 0] if dense is None else [dense.stride(i) if dense.shape[i] > 1 else 0 for i in range(3)]
    tensors = [slopes, lengths, docs, empty_i.to(torch.int8) if dense is None else dense]
    # clamped to the context (a window past S keys is no window, a prefix past them the whole): the kernels
    # add them to positions in int32, where a window of 2^31 - 1 would wrap
    window = S + 1 if params.window is None else min(params.window, S + 1)
    ints = [*dense_strides, min(params.prefix, S), window]
    flags = [params.causal, params.band, score_mod is not None, params.lengths is not None,
             params.document_ids is not None, dense is not None]  # fmt: skip
    return tensors, ints, flags


def _rows_apart(x: Tensor) -> Tensor:
    """x as the kernels read it: any layout whose last stride is 1 (a view of a fused projection, in place)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def _strides(x: Tensor) -> list[int]:
    """A (B, H, T, d) tensor's strides over batch, head and row, as the kernels take them."""
    return list(x.stride()[:3])


def _kernel_args(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tensors: list[Tensor],
    ints: list[int],
    flags: list[bool],
    scale: float,
    kernel: str,
    value: float,
) -> tuple[list[object], dict[str, Any]]:
    """The kernels' shared arguments after their own tensors: (positional, constexpr keywords); each launch
    adds its own kernel's tiles (`_block_sizes`)."""
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    *dense_strides, prefix, window = ints
    positional = [*tensors, *dense_strides, *_strides(q), *_strides(k), *_strides(v), scale, H, H // H_kv, T, S, d,
                  prefix, window]  # fmt: skip
    constexprs = dict(
        zip(FLAGS, flags, strict=True),
        CAP=value if kernel == "softcap" else 0.0,  # cap · tanh(s / cap) on the scores, compiled per cap (0: none)
        SIGMOID=kernel == "sigmoid",  # sigmoid(s + bias) for each weight on its own, compiled per bias
        BIAS=value if kernel == "sigmoid" else 0.0,
        PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32",  # float32: three tf32 products, ~fp32 exact
        UPCAST=q.device.type == "cpu" and q.dtype != torch.float32,  # the interpreter's dot misreads bfloat16
        EVEN_D=d == _block_d(d),  # no column past d: whole blocks load with no predicate
    )
    return positional, constexprs


# The kernels as torch operators (andrea::triton_attention and its backward): torch.compile traces a model
# through them as single nodes, with no graph break, from their fake (shape-only) versions below.
@torch.library.custom_op("andrea::triton_attention", mutates_args=())
def attention_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tensors: list[Tensor],
    ints: list[int],
    flags: list[bool],
    scale: float,
    kernel: str,
    value: float,
) -> tuple[Tensor, Tensor]:
    """(out (B, H, T, d), lse (B, H, T)) = softmax(mask(q kᵀ · scale + bias)) v and each row's log-sum-exp;
    kernel "softcap": the scores capped to value · tanh(s / value) first; "sigmoid": out = sigmoid(s + value) v
    over the allowed keys (lse then unused)."""
    q, k, v = _rows_apart(q), _rows_apart(k), _rows_apart(v)  # read in place: no copy of a transposed view
    B, H, T, _ = q.shape
    args, constexprs = _kernel_args(q, k, v, tensors, ints, flags, scale, kernel, value)
    out = q.new_empty(q.shape)  # contiguous
    lse = torch.empty(B, H, T, device=q.device, dtype=torch.float32)  # log-sum-exp of each row's scores
    tiles = _tiles_for(q, kernel)["forward"]
    grid = launch_grid(T, tiles["BLOCK_M"], B * H)
    kernels(q.device.type == "cpu").attention_forward[grid](q, k, v, out, lse, *args, **constexprs, **tiles)
    return out, lse


@attention_op.register_fake
def _(q: Tensor, *args: object) -> tuple[Tensor, Tensor]:
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)  # contiguous, as the real ones


@torch.library.custom_op("andrea::triton_attention_backward", mutates_args=())
def attention_backward_op(
    d_out: Tensor, d_lse: Tensor | None, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
    tensors: list[Tensor], ints: list[int], flags: list[bool], scale: float, kernel: str, value: float,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dq, dk, dv); the weights recomputed from lse. d_lse: the gradient that reached lse (a sink's scaling
    reads it), or None: lse's gradient is p, so it joins dp - δ as -d_lse."""
    d_out, q, k, v = _rows_apart(d_out), _rows_apart(q), _rows_apart(k), _rows_apart(v)
    out = out.contiguous()  # the forward's own (a no-op)
    B, H, T, _ = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    args, constexprs = _kernel_args(q, k, v, tensors, ints, flags, scale, kernel, value)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)  # contiguous
    flash, tiles = kernels(q.device.type == "cpu"), _tiles_for(q, kernel)
    delta = torch.empty(B, H, T, device=q.device, dtype=torch.float32)  # rowsum(do ⊙ out) - d_lse
    do_strides = _strides(d_out)
    d_lse = lse if d_lse is None else d_lse.float().contiguous()  # without one, lse stands in, unread
    grid_delta = launch_grid(T, tiles["delta"]["BLOCK_M"], B * H)  # δ's pre-pass, then dq: a program per query block
    flash.attention_backward_delta[grid_delta](
        out, d_out, *do_strides, d_lse, delta, H, T, q.shape[-1], HAS_DLSE=d_lse is not lse, **tiles["delta"]
    )
    grid_q = launch_grid(T, tiles["dq"]["BLOCK_M"], B * H)
    flash.attention_backward_dq[grid_q](q, k, v, d_out, dq, lse, delta, *do_strides, *args, **constexprs, **tiles["dq"])
    grid_kv = launch_grid(S, tiles["dkdv"]["BLOCK_N"], B * H_kv)  # dk/dv: a program per key block
    flash.attention_backward_dkdv[grid_kv](
        q, k, v, d_out, dk, dv, lse, delta, *do_strides, *args, **constexprs, **tiles["dkdv"]
    )
    return dq, dk, dv


@attention_backward_op.register_fake
def _(
    d_out: Tensor, d_lse: Tensor | None, q: Tensor, k: Tensor, v: Tensor, *args: object
) -> tuple[Tensor, Tensor, Tensor]:
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)  # contiguous, as the real ones


def _save_for_backward(ctx: Any, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
    q, k, v, tensors, ints, flags, scale, kernel, value = inputs
    ctx.save_for_backward(q, k, v, *output, *tensors)
    ctx.ints, ctx.flags, ctx.scale, ctx.kernel, ctx.value = ints, flags, scale, kernel, value


def _backward(ctx: Any, d_out: Tensor, d_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    q, k, v, out, lse, *tensors = ctx.saved_tensors
    grads = attention_backward_op(
        d_out, d_lse, q, k, v, out, lse, tensors, ctx.ints, ctx.flags, ctx.scale, ctx.kernel, ctx.value
    )
    return *grads, [None] * len(tensors), *(None,) * 5  # the inputs' structure: no gradient past q, k, v


attention_op.register_autograd(_backward, setup_context=_save_for_backward)


def _kernel_of(mechanism: Mechanism | None) -> tuple[str, float]:
    """(the kernels' math, its number) for a mechanism: softcap and its cap, sigmoid and its bias, or softmax
    (a sink's too: its output is scaled after, from the log-sum-exp)."""
    if isinstance(mechanism, Softcap):
        return "softcap", mechanism.cap
    if isinstance(mechanism, Sigmoid):
        return "sigmoid", mechanism.bias
    return "softmax", 0.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


GRID_LIMITS = (2**31 - 1, 65_535)  # CUDA's most programs on a grid's first axis, and on its second


def launch_grid(rows: int, block: int, heads: int) -> tuple[int, int]:
    """A kernel's grid: (blocks of `block` of its `rows` queries or keys, `heads` = batch x heads). The blocks
    grow with the length (1M keys at head_dim 256 are 65,536 blocks of dk/dv's 16), so they take the first axis;
    beyond what the second axis takes, the call is refused in one line."""
    grid = (max(1, _cdiv(rows, block)), heads)
    if grid[1] > GRID_LIMITS[1] or grid[0] > GRID_LIMITS[0]:
        raise UnsupportedAttentionError(
            f"attention backend 'triton' launches one program per block and (sequence, head): {rows} rows in blocks "
            f"of {block} for {heads} sequence-heads pass a GPU's grid {GRID_LIMITS}; use a smaller batch, or "
            "attention=sdpa"
        )
    return grid


class _Capabilities:
    """Triton's capabilities as they stand when read: CPU tensors run only while the interpreter is on."""

    def __get__(self, backend: object, owner: type) -> Capabilities:
        interpreted = interpreter_on()
        return Capabilities(
            native_weights=False,  # never forms the (T, S) weights: the contract's probe computes them
            cpu_backward=interpreted,
            native_gqa=True,
            score_mod=True,  # ALiBi, in the kernel
            kernels=KERNELS,
            cpu=interpreted,
            unavailable=None if TRITON_INSTALLED else f"Triton is not installed; {INSTALL}",
        )


class TritonBackend(AttentionBackend):
    name = "triton"
    capabilities = _Capabilities()  # a descriptor: read at each access, not fixed at import

    def check(
        self,
        *,
        mask: Mask | None,
        device: torch.device | str | None,
        needs_grad: bool,
        score_mod: ScoreMod | None = None,
        head_dim: int | None = None,
    ) -> None:
        on_cpu = device is not None and torch.device(device).type == "cpu"
        if on_cpu and TRITON_INSTALLED and not interpreter_on():
            raise UnsupportedAttentionError(
                "attention backend 'triton' runs on CUDA GPUs (on CPU only under Triton's interpreter, "
                f"{INTERPRETER}=1, slowly: for tests); use {_alternatives(lambda c: c.cpu)}, or a GPU"
            )
        if on_cpu and TRITON_INSTALLED and not _language_interpreted():
            raise UnsupportedAttentionError(
                f"attention backend 'triton': {INTERPRETER}=1 was set after Triton was imported; set it before "
                "the process starts (Triton reads it once, at import)"
            )
        super().check(mask=mask, device=device, needs_grad=needs_grad, score_mod=score_mod, head_dim=head_dim)
        if score_mod is not None and not isinstance(score_mod, ALiBi):
            raise UnsupportedAttentionError(
                f"attention backend 'triton' adds ALiBi in its kernel, not {score_mod.kind}; use attention=sdpa or flex"
            )
        if head_dim is not None and head_dim > MAX_HEAD_DIM:
            raise UnsupportedAttentionError(
                f"attention backend 'triton' takes head_dim <= {MAX_HEAD_DIM}, got {head_dim}; use more heads"
            )

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        if q.dtype == torch.float32 and q.device.type == "cuda" and q.shape[-1] > FLOAT32_MAX_HEAD_DIM:
            raise UnsupportedAttentionError(
                f"attention backend 'triton' takes float32 up to head_dim {FLOAT32_MAX_HEAD_DIM} on a GPU, got "
                f"{q.shape[-1]} (its tiles would not fit in shared memory); use bfloat16 "
                "(trainer.precision=bf16-mixed), or attention=sdpa"
            )
        tensors, ints, flags = _mask_inputs(q, k, mask, score_mod)
        kernel, value = _kernel_of(mechanism)
        out, lse = attention_op(q, k, v, tensors, ints, flags, scale, kernel, value)  # (B, H, T, d), (B, H, T)
        if not isinstance(mechanism, Sink):
            return out, None
        # a sink: exp(sink) joins each row's sum Z = exp(lse), so out shrinks by Z / (Z + exp(sink))
        sink = mechanism.sink.view(1, -1, 1).to(lse.dtype)
        return out * torch.sigmoid(lse - sink).unsqueeze(-1).to(out.dtype), None
