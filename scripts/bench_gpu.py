"""On an NVIDIA GPU: andrea's triton kernel checked against naive, timed beside sdpa and compiled flex,
and ANDREA-120M trained with each.

    python scripts/bench_gpu.py --dry-run            # every part's plan, shapes, compile counts and minutes; no GPU
    python scripts/bench_gpu.py --part kernel        # parity, then the attention table (scripts/gpu_check.sh, part 1)
    python scripts/bench_gpu.py --part train         # ANDREA-120M, triton beside sdpa (part 2)
    python scripts/bench_gpu.py --part attention --seq-lens 1024 4096 16384 --table-masks causal window

Parity on CUDA: triton against naive on the GPU, forward and backward, with the conformance kit's own
check and tolerances, at T = 300 (several blocks of every kernel's tiles, the last one partial),
head_dim 64 and 128 (each its own tiles). The matrix is trimmed to what compiles a distinct kernel: at
head_dim 64 every mask kind in bfloat16 with GQA, causal over every head layout and both dtypes, ALiBi on
causal and a window; at head_dim 128 (bfloat16: float32 stops at 64 on a GPU) causal, and packed documents
with ALiBi. A failed cell is collected and listed at the end; it never stops the others.

The attention table: one attention op of B x H x T x d in bf16 (default 4 x 12 x T x 64, an ANDREA-120M
layer), causal (--table-masks adds the sliding window), forward and forward+backward, T in {1024, 8192}
by default (compiled flex's compiles dominate the part's time): the median
ms of triton.testing.do_bench (gradients reset between calls), TFLOP/s and the fraction of a bf16
matmul peak measured at the start of the same run. FLOPs count only the score entries the mask keeps
(4·B·H·d per kept entry forward, 3.5x that with the backward), so a backend that skips masked blocks
is not credited for work it does not do. Compiled flex compiles once per shape (the recompile limit is
raised to fit the table). sdpa's rows name the kernel it runs: causal takes FlashAttention-2
(is_causal), a window goes in as a dense mask (memory-efficient attention).

Training: ANDREA-120M (GPT-2 small's shape) from the same initial weights, on the same batches (copy
tasks: a random block of tokens followed by its repeat, which a model learns only through attention),
bf16 autocast, fused AdamW, for `--steps` steps with attention=triton and attention=sdpa: tokens/s,
MFU, and the two loss curves side by side every 25 steps with their largest difference.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from andrea.attention import Causal, Document, KeyPadding, NoMask, PrefixLM, SlidingWindow, get_backend
from andrea.attention.masks import Mask
from andrea.attention.positions import ALiBi
from andrea.models.gpt import GPT
from andrea.testing.checks import HEADS

BACKENDS = {"triton": {}, "sdpa": {}, "flex": {"compile": True}}
SDPA_KERNEL = {"causal": "flash (is_causal)", "window": "efficient (dense mask)"}
PARITY_SEQ, PARITY_HEAD_DIMS = 300, (64, 128)
SECONDS_PER_COMPILE = {"triton": 3, "flex": 12}  # rough, for the dry run's minutes (an H100/H200 host)
KERNELS = 4  # the triton kernels one variant compiles: forward, δ's pre-pass, dq, dk/dv


@dataclass(frozen=True)
class ParityCell:
    mask_name: str
    heads: str
    dtype: torch.dtype
    alibi: bool
    head_dim: int = 64

    def variant(self, masks: dict[str, Mask]) -> tuple:
        """What makes Triton compile another kernel: the mask's flags, the dtype, ALiBi, grouped or not, the
        head size (its tiles)."""
        params = masks[self.mask_name].params()
        flags = None if params is None else (params.causal, params.band, params.lengths is None,
                                             params.document_ids is None)  # fmt: skip
        return flags, self.dtype, self.alibi, HEADS[self.heads][0] == HEADS[self.heads][1], self.head_dim

    def __str__(self) -> str:
        return f"{self.mask_name} x {self.heads} x {self.dtype} x alibi={self.alibi} x d={self.head_dim}"


def parity_masks(device: str) -> dict[str, Mask]:
    docs = torch.tensor([[0] * 100 + [1] * 150 + [2] * 50, [0] * 290 + [1] * 10], device=device)
    return {
        "none": NoMask(), "causal": Causal(), "sliding_window_64": SlidingWindow(64),
        "band_32": SlidingWindow(32, causal=False), "prefix_lm_100": PrefixLM(100),
        "causal&padding": Causal() & KeyPadding(torch.tensor([300, 123], device=device)),
        "causal&document": Causal() & Document(docs), "window|document (dense)": SlidingWindow(16) | Document(docs),
    }  # fmt: skip


def parity_cells(masks: dict[str, Mask]) -> list[ParityCell]:
    cells = [ParityCell(name, "gqa", torch.bfloat16, False) for name in masks]
    cells += [ParityCell("causal", heads, dtype, False) for heads in HEADS for dtype in (torch.float32, torch.bfloat16)]
    cells += [ParityCell(name, "gqa", torch.bfloat16, True) for name in ("causal", "sliding_window_64")]
    wide = PARITY_HEAD_DIMS[1]  # its own tiles: the causal kernel, and the one with every flag it takes
    cells += [ParityCell("causal", "gqa", torch.bfloat16, False, wide),
              ParityCell("causal&document", "gqa", torch.bfloat16, True, wide)]  # fmt: skip
    return list(dict.fromkeys(cells))


def parity(args: argparse.Namespace) -> list[str]:
    """The kit's parity check (andrea.testing.checks.parity) on CUDA; returns the failed cells."""
    from andrea.testing.checks import parity as check

    masks, triton, failures = parity_masks("cuda"), get_backend("triton"), []
    cells = parity_cells(masks)
    for cell in cells:
        score_mod = ALiBi(HEADS[cell.heads][0]) if cell.alibi else None
        try:
            status = check(triton, masks[cell.mask_name], cell.heads, cell.dtype, True, score_mod,
                           seq=PARITY_SEQ, head_dim=cell.head_dim, device="cuda")  # fmt: skip
        except Exception as err:  # an assertion of the kit, or a kernel that failed to compile or launch
            status = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
        if status != "passed":
            failures.append(f"{cell}: {status}")
    print(f"parity on CUDA: {len(cells) - len(failures)} of {len(cells)} cells passed (forward and backward), "
          f"T={PARITY_SEQ}, head_dim {' and '.join(map(str, PARITY_HEAD_DIMS))}")  # fmt: skip
    for failure in failures:
        print(f"  FAILED {failure}")
    return failures


def matmul_peak(n: int = 8192) -> float:
    from triton.testing import do_bench

    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * n**3 / (do_bench(lambda: a @ b, return_mode="median") / 1e3)


def kept_entries(mask: Mask, T: int, device: str) -> int:
    return int(mask.dense(T, T, device=device).sum())


def table_masks(args: argparse.Namespace) -> dict[str, Mask]:
    masks = {"causal": Causal(), "window": SlidingWindow(args.window)}
    return {kind: masks[kind] for kind in args.table_masks}


def attention_table(args: argparse.Namespace) -> None:
    from triton.testing import do_bench

    from andrea.bench.torch_internals import raise_recompile_limit

    raise_recompile_limit(4 * len(args.seq_lens) * len(table_masks(args)))  # flex: once per shape, mask and pass
    print("\n| T | mask | pass | backend | ms | TFLOP/s | × peak |\n|---:|---|---|---|---:|---:|---:|")
    B, H, d = args.batch, args.heads, args.head_dim
    for T in args.seq_lens:
        for kind, mask in table_masks(args).items():
            flops_fwd = 4 * B * H * d * kept_entries(mask, T, "cuda")
            for backward in (False, True):
                q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16, requires_grad=backward)
                           for _ in range(3))  # fmt: skip
                for name, options in BACKENDS.items():
                    backend = get_backend(name, **options)
                    label = f"sdpa, {SDPA_KERNEL[kind]}" if name == "sdpa" else name

                    def call(backend=backend, q=q, k=k, v=v, mask=mask, backward=backward):
                        out, _ = backend(q, k, v, mask)
                        if backward:
                            out.backward(torch.ones_like(out))

                    pass_name = "fwd+bwd" if backward else "fwd"
                    try:  # gradients reset before every call: each backward writes them anew
                        ms = do_bench(call, grad_to_none=[q, k, v] if backward else None, return_mode="median")
                    except Exception as err:  # a cell that does not run is reported, not fatal
                        print(f"| {T} | {mask.name} | {pass_name} | {label} | failed: "
                              f"{type(err).__name__}: {str(err).splitlines()[0][:80]} | | |")  # fmt: skip
                        continue
                    tflops = flops_fwd * (3.5 if backward else 1.0) / (ms / 1e3) / 1e12
                    print(f"| {T} | {mask.name} | {pass_name} | {label} | {ms:.3f} | {tflops:.0f} | "
                          f"{tflops * 1e12 / args.peak:.2f} |", flush=True)  # fmt: skip


def copy_batches(steps: int, batch: int, T: int, vocab: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        half = torch.randint(vocab, (batch, T // 2), generator=generator)
        yield torch.cat([half, half], dim=1).cuda()  # (batch, T): the second half repeats the first


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    reference = GPT(50257, args.seq_len, 12, 768, attention=dict(n_head=12, backend="sdpa"))
    results = {}
    for name in ("triton", "sdpa"):
        model = GPT(50257, args.seq_len, 12, 768, attention=dict(n_head=12, backend=name)).cuda()
        model.load_state_dict(reference.state_dict())
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        losses, start, tokens = [], None, 0
        for step, idx in enumerate(copy_batches(args.steps, args.train_batch, args.seq_len, 50257)):
            if step == 5:  # warm-up steps (kernel compilation) left out of the timing
                torch.cuda.synchronize()
                start, tokens = time.perf_counter(), 0
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits, _ = model(idx[:, :-1])
                loss = F.cross_entropy(logits.float().flatten(0, 1), idx[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.detach())  # read once at the end: no host-device wait per step
            tokens += idx.numel()
        torch.cuda.synchronize()
        tokens_per_s = tokens / (time.perf_counter() - start)
        mfu = model.flops_per_token(args.seq_len) * tokens_per_s / args.peak
        results[name] = torch.stack(losses).tolist()
        print(f"- attention={name}: {tokens_per_s:,.0f} tokens/s, MFU {100 * mfu:.1f}%", flush=True)
    triton, sdpa = results["triton"], results["sdpa"]
    print("\n| step | loss triton | loss sdpa | difference |\n|---:|---:|---:|---:|")
    for step in range(0, args.steps, 25):
        print(f"| {step} | {triton[step]:.4f} | {sdpa[step]:.4f} | {triton[step] - sdpa[step]:+.4f} |")
    print(f"\nlargest |difference|: {max(abs(a - b) for a, b in zip(triton, sdpa, strict=True)):.4f}; "
          f"final {triton[-1]:.4f} vs {sdpa[-1]:.4f}")  # fmt: skip


def dry_run(args: argparse.Namespace, parts: list[str]) -> None:
    """Each part's plan: its cells and shapes, the kernels it compiles and a rough duration; no CUDA touched."""
    minutes = 0.0
    if "parity" in parts:
        masks = parity_masks("cpu")
        cells = parity_cells(masks)
        for cell in cells:
            print(f"parity: {cell}: fwd+bwd, ({2}, {HEADS[cell.heads][0]}, {PARITY_SEQ}, {cell.head_dim})")
        compiles = KERNELS * len({cell.variant(masks) for cell in cells})
        part = compiles * SECONDS_PER_COMPILE["triton"] / 60 + 0.05 * len(cells)
        minutes += part
        print(f"parity: {len(cells)} cells, {compiles} triton compiles, about {part:.1f} min")
    if "attention" in parts:
        shapes = [(T, kind, p) for T in args.seq_lens for kind in table_masks(args) for p in ("fwd", "fwd+bwd")]
        for T, kind, pass_name in shapes:
            print(f"attention: ({args.batch}, {args.heads}, {T}, {args.head_dim}) bf16, {kind}, {pass_name}: "
                  f"{', '.join(BACKENDS)}")  # fmt: skip
        flex = len(shapes)  # compiled once per shape, mask and pass
        compiling = KERNELS * SECONDS_PER_COMPILE["triton"] + flex * SECONDS_PER_COMPILE["flex"]
        part = compiling / 60 + 0.03 * 3 * len(shapes)
        minutes += part
        print(f"attention: {3 * len(shapes)} cells, {KERNELS} triton compiles, {flex} flex compiles, "
              f"about {part:.1f} min")  # fmt: skip
    if "train" in parts:
        per_step = 6 * 124e6 * args.train_batch * args.seq_len / 250e12  # ~40% of an H100/H200's bf16 peak
        part = (2 * args.steps * per_step + KERNELS * SECONDS_PER_COMPILE["triton"] + 30) / 60
        minutes += part
        print(f"train: ANDREA-120M, {args.steps} steps of ({args.train_batch}, {args.seq_len}) tokens, "
              f"triton then sdpa, about {part:.1f} min")  # fmt: skip
    print(f"dry run: {', '.join(parts)}: about {minutes:.1f} min on an H100/H200")


PARTS = {"parity": ["parity"], "attention": ["attention"], "train": ["train"],
         "kernel": ["parity", "attention"], "all": ["parity", "attention", "train"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=list(PARTS), default="all")
    parser.add_argument("--dry-run", action="store_true", help="print each part's plan; no GPU needed")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--table-masks", nargs="+", choices=["causal", "window"], default=["causal"])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seq-len", type=int, default=1024, help="training context")
    parser.add_argument("--train-batch", type=int, default=16)
    args = parser.parse_args()
    parts = PARTS[args.part]
    if args.dry_run:
        dry_run(args, parts)
        return
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs an NVIDIA GPU (torch.cuda.is_available() is False); --dry-run plans")
    args.peak = matmul_peak()  # measured once, for the attention table and the training MFU
    print(
        f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; bf16 matmul peak {args.peak / 1e12:.0f} TFLOP/s"
    )
    failures = parity(args) if "parity" in parts else []
    if "attention" in parts:
        attention_table(args)
    if "train" in parts:
        print(f"\n# ANDREA-120M, {args.steps} steps of {args.train_batch} x {args.seq_len} tokens, bf16 autocast\n")
        train(args)
    if failures:
        raise SystemExit(f"{len(failures)} parity cell(s) failed (listed above)")


if __name__ == "__main__":
    main()
