"""On an NVIDIA GPU: each triton kernel timed with candidate tiles beside the ones the backend launches it with
(TILES in andrea/attention/backends/triton.py), so that a run on a GPU picks them by measurement.

    python scripts/bench_tiles.py --dry-run          # the candidates and a rough duration; no GPU needed
    python scripts/bench_tiles.py                    # the table (scripts/gpu_check.sh, part 3)

One attention op of B x H x T x d in bf16 (default 4 x 12 x 4096 x d, causal), d in {64, 128}. For each
kernel and candidate (BLOCK_M, BLOCK_N, warps, stages), the other kernels at their TILES: the median ms
of triton.testing.do_bench (the forward's rows time the forward; dq's and dk/dv's time forward+backward,
gradients reset between calls), the ratio to TILES' own row, and the registers and spilled bytes ptxas
reports for that kernel compiled for sm_90a (scripts/kernel_report.py). A faster candidate with no spill
is the one to write into TILES.
"""

from __future__ import annotations

import argparse
import contextlib

import torch
from kernel_report import compile_kernel  # beside this script (its folder leads sys.path)

from andrea.attention import Causal, get_backend
from andrea.attention.backends import triton_tiles
from andrea.attention.backends.triton_tiles import _block_d

NAMES = {"forward": "attention_forward", "dq": "attention_backward_dq", "dkdv": "attention_backward_dkdv"}
CANDIDATES = {  # beside TILES' own: larger and smaller tiles, more and fewer stages, as the Triton tutorial tries
    64: dict(forward=[(64, 64, 4, 3), (128, 128, 8, 3), (128, 32, 8, 3), (64, 64, 4, 4)],
             dq=[(128, 32, 8, 3), (64, 32, 4, 3), (128, 64, 8, 3), (64, 64, 4, 2)],
             dkdv=[(64, 128, 8, 2), (64, 64, 4, 2), (32, 64, 4, 3), (32, 64, 8, 3)]),
    128: dict(forward=[(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 3), (64, 64, 8, 2)],
              dq=[(64, 32, 8, 3), (128, 32, 8, 3), (64, 64, 8, 2)],
              dkdv=[(32, 128, 8, 3), (16, 128, 8, 3), (64, 64, 8, 2)]),
}  # fmt: skip
SECONDS_PER_CANDIDATE = 4  # rough: a compile for the GPU, one for ptxas's report, and the timing


def _key(head_dim: int) -> tuple[str, int]:
    """TILES' row for 16-bit inputs of this head_dim, as the backend looks it up."""
    return "16-bit", max(64, _block_d(head_dim))


@contextlib.contextmanager
def launched_with(head_dim: int, kernel: str, tiles: tuple[int, int, int, int]):
    """The backend launching `kernel` with `tiles` (for 16-bit inputs of this head_dim) inside the block."""
    key = _key(head_dim)
    before = triton_tiles.TILES[key]
    triton_tiles.TILES[key] = before | {kernel: tiles}
    try:
        yield
    finally:
        triton_tiles.TILES[key] = before


def time_op(args: argparse.Namespace, head_dim: int, backward: bool) -> float:
    from triton.testing import do_bench

    q, k, v = (torch.randn(args.batch, args.heads, args.seq_len, head_dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=backward) for _ in range(3))  # fmt: skip
    backend = get_backend("triton")

    def call() -> None:
        out, _ = backend(q, k, v, Causal())
        if backward:
            out.backward(torch.ones_like(out))

    return do_bench(call, grad_to_none=[q, k, v] if backward else None, return_mode="median")


def table(args: argparse.Namespace) -> None:
    print(f"\n# triton tiles, ({args.batch}, {args.heads}, {args.seq_len}, d) bf16 causal; "
          "forward rows: forward ms; dq and dk/dv rows: forward+backward ms\n")  # fmt: skip
    print("| d | kernel | tiles M x N, warps, stages | ms | × TILES' | registers | spilled B |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for head_dim, kernels in CANDIDATES.items():
        for kernel, candidates in kernels.items():
            own = triton_tiles.TILES[_key(head_dim)][kernel]
            base = None
            for tiles in [own, *candidates]:
                m, n, warps, stages = tiles
                report = compile_kernel("bf16", head_dim, "causal", NAMES[kernel],
                                        dict(BLOCK_M=m, BLOCK_N=n, BLOCK_D=_block_d(head_dim), num_warps=warps,
                                             num_stages=stages))  # fmt: skip
                with launched_with(head_dim, kernel, tiles):
                    try:
                        ms = time_op(args, head_dim, backward=kernel != "forward")
                    except Exception as err:  # a candidate that does not launch is reported, not fatal
                        print(f"| {head_dim} | {kernel} | {m}x{n}, {warps}, {stages} | failed: "
                              f"{type(err).__name__}: {str(err).splitlines()[0][:80]} | | | |")  # fmt: skip
                        continue
                base = base or ms
                label = f"{m}x{n}, {warps}, {stages}" + (" (TILES)" if tiles == own else "")
                print(f"| {head_dim} | {kernel} | {label} | {ms:.3f} | {ms / base:.2f} | {report['registers']} | "
                      f"{report['spills']} |", flush=True)  # fmt: skip


def dry_run() -> None:
    count = 0
    for head_dim, kernels in CANDIDATES.items():
        for kernel, candidates in kernels.items():
            own = triton_tiles.TILES[_key(head_dim)][kernel]
            count += 1 + len(candidates)
            listed = ", ".join(f"{m}x{n} w{w} s{s}" for m, n, w, s in candidates)
            print(f"tiles: d={head_dim} {kernel}: TILES {own}, then {listed}")
    print(f"tiles: {count} candidates, about {count * SECONDS_PER_CANDIDATE / 60:.1f} min (gpu_check.sh tiles: not in "
          "its default run)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the candidates; no GPU needed")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    args = parser.parse_args()
    if args.dry_run:
        dry_run()
        return
    if not torch.cuda.is_available():
        raise SystemExit("bench_tiles.py needs an NVIDIA GPU (torch.cuda.is_available() is False); --dry-run plans")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    table(args)


if __name__ == "__main__":
    main()
