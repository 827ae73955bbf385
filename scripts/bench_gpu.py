"""On an NVIDIA GPU: andrea's triton kernel checked against naive, timed beside sdpa and compiled flex,
and ANDREA-120M trained with each.

    python scripts/bench_gpu.py                      # every part (scripts/gpu_check.sh runs this)
    python scripts/bench_gpu.py --part attention --seq-lens 1024 4096
    python scripts/bench_gpu.py --part train --steps 300

Part 0, parity on CUDA: triton against naive on the GPU, forward and backward, every mask kind
the kernel reads as parameters plus one it reads dense, MHA/GQA/MQA, float32 and bfloat16, at
T = 300 (several 64-wide blocks, the last one partial), with the conformance kit's tolerances.

Part 1, the attention table: one attention op of B x H x T x d in bf16 (default 4 x 12 x T x 64, an
ANDREA-120M layer), causal and sliding window, forward and forward+backward, T in {1024, 4096,
16384}: median ms (triton.testing.do_bench), TFLOP/s and the fraction of a bf16 matmul peak
measured at the start of the same run. FLOPs count only the score entries the mask keeps
(4·B·H·d per kept entry forward, 2.5x that for the backward), so a backend that skips masked
blocks is not credited for work it does not do.

Part 2, training: ANDREA-120M (GPT-2 small's shape) from the same initial weights, on the same
batches (copy tasks: a random block of tokens followed by its repeat, which a model learns only
through attention), bf16 autocast, fused AdamW, for `--steps` steps with attention=triton and
attention=sdpa: tokens/s, MFU, and the two loss curves side by side every 25 steps with their
largest difference.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from andrea.attention import Causal, SlidingWindow, get_backend
from andrea.models.gpt import GPT

BACKENDS = {"triton": {}, "sdpa": {}, "flex": {"compile": True}}


def parity() -> None:
    """The conformance kit's parity check (andrea.testing.checks.parity), on CUDA at T = 300, head_dim 64."""
    from andrea.attention import Document, KeyPadding, NoMask, PrefixLM
    from andrea.attention.positions import ALiBi
    from andrea.testing.checks import HEADS
    from andrea.testing.checks import parity as check

    docs = torch.tensor([[0] * 100 + [1] * 150 + [2] * 50, [0] * 290 + [1] * 10], device="cuda")
    masks = {
        "none": NoMask(), "causal": Causal(), "sliding_window_64": SlidingWindow(64),
        "band_32": SlidingWindow(32, causal=False), "prefix_lm_100": PrefixLM(100),
        "causal&padding": Causal() & KeyPadding(torch.tensor([300, 123], device="cuda")),
        "causal&document": Causal() & Document(docs), "window|document (dense)": SlidingWindow(16) | Document(docs),
    }  # fmt: skip
    triton, passed = get_backend("triton"), 0
    for mask in masks.values():
        for heads in HEADS:
            for dtype in (torch.float32, torch.bfloat16):
                for score_mod in (None, ALiBi(HEADS[heads][0])):
                    status = check(triton, mask, heads, dtype, True, score_mod, seq=300, head_dim=64, device="cuda")
                    assert status == "passed", status
                    passed += 1
    print(f"parity on CUDA: {passed} cells passed (forward and backward each), T=300, head_dim 64")


def matmul_peak(n: int = 8192) -> float:
    from triton.testing import do_bench

    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * n**3 / (do_bench(lambda: a @ b) / 1e3)


def kept_entries(mask, T: int) -> int:
    return int(mask.dense(T, T, device="cuda").sum())


def attention_table(args) -> None:
    from triton.testing import do_bench

    peak = args.peak
    print("\n| T | mask | pass | backend | ms | TFLOP/s | × peak |\n|---:|---|---|---|---:|---:|---:|")
    B, H, d = args.batch, args.heads, args.head_dim
    for T in args.seq_lens:
        for mask in (Causal(), SlidingWindow(args.window)):
            flops_fwd = 4 * B * H * d * kept_entries(mask, T)
            for backward in (False, True):
                q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16, requires_grad=backward)
                           for _ in range(3))  # fmt: skip
                for name, options in BACKENDS.items():
                    backend = get_backend(name, **options)

                    def call(backend=backend, q=q, k=k, v=v, mask=mask, backward=backward):
                        out, _ = backend(q, k, v, mask)
                        if backward:
                            out.backward(torch.ones_like(out))

                    try:
                        ms = do_bench(call)
                    except Exception as err:  # a cell that does not run is reported, not fatal
                        print(f"| {T} | {mask.name} | {'fwd+bwd' if backward else 'fwd'} | {name} | failed: "
                              f"{type(err).__name__}: {str(err).splitlines()[0][:80]} | | |")  # fmt: skip
                        continue
                    flops = flops_fwd * (3.5 if backward else 1.0)
                    tflops = flops / (ms / 1e3) / 1e12
                    print(f"| {T} | {mask.name} | {'fwd+bwd' if backward else 'fwd'} | {name} | {ms:.3f} | "
                          f"{tflops:.0f} | {tflops * 1e12 / peak:.2f} |", flush=True)  # fmt: skip


def copy_batches(steps: int, batch: int, T: int, vocab: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        half = torch.randint(vocab, (batch, T // 2), generator=generator)
        yield torch.cat([half, half], dim=1).cuda()  # (batch, T): the second half repeats the first


def train(args) -> None:
    torch.manual_seed(0)
    reference = GPT(50257, args.seq_len, 12, 768, attention=dict(n_head=12, backend="sdpa"))
    results = {}
    for name in ("triton", "sdpa"):
        model = GPT(50257, args.seq_len, 12, 768, attention=dict(n_head=12, backend=name)).cuda()
        model.load_state_dict(reference.state_dict())
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        losses, start, tokens = [], None, 0
        for step, idx in enumerate(copy_batches(args.steps, args.batch, args.seq_len, 50257)):
            if step == 5:  # warm-up steps (kernel compilation) left out of the timing
                torch.cuda.synchronize()
                start, tokens = time.perf_counter(), 0
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits, _ = model(idx[:, :-1])
                loss = F.cross_entropy(logits.float().flatten(0, 1), idx[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            tokens += idx.numel()
        torch.cuda.synchronize()
        tokens_per_s = tokens / (time.perf_counter() - start)
        mfu = model.flops_per_token(args.seq_len) * tokens_per_s / args.peak
        results[name] = (losses, tokens_per_s, mfu)
        print(f"- attention={name}: {tokens_per_s:,.0f} tokens/s, MFU {100 * mfu:.1f}%", flush=True)
    (triton, *_), (sdpa, *_) = results["triton"], results["sdpa"]
    print("\n| step | loss triton | loss sdpa | difference |\n|---:|---:|---:|---:|")
    for step in range(0, args.steps, 25):
        print(f"| {step} | {triton[step]:.4f} | {sdpa[step]:.4f} | {triton[step] - sdpa[step]:+.4f} |")
    print(f"\nlargest |difference|: {max(abs(a - b) for a, b in zip(triton, sdpa, strict=True)):.4f}; "
          f"final {triton[-1]:.4f} vs {sdpa[-1]:.4f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["parity", "attention", "train", "all"], default="all")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seq-len", type=int, default=1024, help="training context")
    parser.add_argument("--train-batch", type=int, default=16)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    args.peak = matmul_peak()  # measured once, for the attention table and the training MFU
    print(
        f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; bf16 matmul peak {args.peak / 1e12:.0f} TFLOP/s"
    )
    if args.part in ("parity", "all"):
        parity()
    if args.part in ("attention", "all"):
        attention_table(args)
    if args.part in ("train", "all"):
        args.batch = args.train_batch
        print(f"\n# ANDREA-120M, {args.steps} steps of {args.batch} x {args.seq_len} tokens, bf16 autocast\n")
        train(args)


if __name__ == "__main__":
    main()
