"""Benchmark every attention backend beside the raw F.scaled_dot_product_attention call.

    python scripts/bench_attention.py                  # T in 256 1024 4096, about 10 min on 2 CPU threads
    python scripts/bench_attention.py --seq-lens 256 --repeats 3
    python scripts/bench_attention.py --selections     # dsa, moba, nsa beside dense attention, T 1024 .. 16384

One attention op, B=1, H=12, d=64 (an ANDREA-120M layer), causal and sliding-
window masks, forward and forward+backward. The mask reaches each backend as the
block passes it (a static mask sliced from a buffer built once). Every cell
times the raw SDPA call and each backend in interleaved rounds on the same
tensors and reports the median, the ratio to the raw call, and the peak tensor
memory created during one call (andrea.bench.timing.peak_memory_mib). A backend that
declares a pass unsupported is listed with its reason.

With --selections: one attention layer with each selection of keys (dsa, moba, nsa) beside the same layer
dense, forward and forward+backward, to T = 16384 (andrea.bench.selections), under a limit on the process's
memory (--memory-limit-gib) so that a cell that does not fit says so instead of stopping the machine.
"""

from __future__ import annotations

import argparse
import platform
import resource

import torch
import torch.nn.functional as F

from andrea.attention import Causal, SlidingWindow, backend_registry, get_backend
from andrea.attention.masks import PrecomputedMask
from andrea.bench.selections import crossovers, selection_table
from andrea.bench.timing import median_ms, paired_ratio, peak_memory_mib

RAW = "raw F.sdpa"
DEFAULT_SEQ_LENS = [256, 1024, 4096]


def candidates(device: str, with_compiled_flex: bool) -> dict[str, object]:
    order = ["naive", "eager", "sdpa", "flex"]  # built-ins first, then plugins
    names = sorted(backend_registry.names(), key=lambda n: (order.index(n) if n in order else len(order), n))
    found = {name: get_backend(name) for name in names}
    if "flex" in found:
        found["flex"] = get_backend("flex", compile=False)
        if with_compiled_flex:
            found["flex+compile"] = get_backend("flex", compile=True)
    return found


def make_call(fn, inputs, backward: bool):
    def call():
        out = fn(*inputs)
        if backward:
            out.backward(torch.ones_like(out))
            for t in inputs:
                t.grad = None
        return out

    return call


def bench_cell(seq_len, mask, backward, impls, args, device):
    shape = (args.batch, args.heads, seq_len, args.head_dim)
    inputs = [torch.randn(shape, device=device, requires_grad=backward) for _ in range(3)]
    dense = mask.dense(seq_len, seq_len, device=device)  # built once, as a block's buffer is
    block_mask = PrecomputedMask(mask, dense)

    def raw(q, k, v):
        if mask.is_causal:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=dense)

    calls, rows = {RAW: make_call(raw, inputs, backward)}, {}
    for name, backend in impls.items():
        refusal = backend.refusal(mask=block_mask, device=device, needs_grad=backward)
        if refusal is not None:
            rows[name] = f"unsupported: {refusal}"
            continue
        calls[name] = make_call(lambda q, k, v, b=backend: b(q, k, v, block_mask)[0], inputs, backward)

    repeats = max(3, round(args.repeats * (1024 / seq_len) ** 0.5))  # more rounds where calls are short
    times = median_ms(calls, repeats=repeats, warmup=1)
    memory = {name: peak_memory_mib(call) for name, call in calls.items()}
    for name in calls:
        rows[name] = (times[name], memory[name])
    if "sdpa" in calls:  # the 1.03x target, measured pair by pair with more rounds
        rows["sdpa / raw, paired"] = paired_ratio(calls["sdpa"], calls[RAW], rounds=max(9, 3 * repeats))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=DEFAULT_SEQ_LENS)
    parser.add_argument("--window", type=int, default=128, help="sliding window size (keys per query)")
    parser.add_argument(
        "--repeats", type=int, default=9, help="timed rounds per cell at T=1024 (scaled by sqrt(1024/T))"
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-compiled-flex", action="store_true", help="skip torch.compile'd Flex (slow to compile)")
    parser.add_argument("--selections", action="store_true", help="the selections of keys beside dense attention")
    parser.add_argument("--memory-limit-gib", type=float, default=20.0, help="with --selections: the address space")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.selections:
        selections(args)
        return
    impls = candidates(args.device, not args.no_compiled_flex)

    print(
        f"# attention backends vs raw SDPA: B={args.batch} H={args.heads} d={args.head_dim}, "
        f"{args.device} ({platform.processor() or platform.machine()}, {args.threads} threads), torch "
        f"{torch.__version__}\n"
    )
    print("| T | mask | pass | backend | median ms | × raw | peak MiB | mem × raw |")
    print("|---:|---|---|---|---:|---:|---:|---:|")
    notes, results = {}, {}
    for seq_len in args.seq_lens:
        for mask in (Causal(), SlidingWindow(args.window)):
            for backward in (False, True):
                rows = bench_cell(seq_len, mask, backward, impls, args, args.device)
                raw_ms, raw_mib = rows[RAW]
                pass_name = "fwd+bwd" if backward else "fwd"
                for name, row in rows.items():
                    results[(seq_len, mask.kind, pass_name, name)] = row
                    if isinstance(row, float):
                        continue  # a paired ratio, reported under targets
                    if isinstance(row, str):
                        number = notes.setdefault(row, len(notes) + 1)
                        print(f"| {seq_len} | {mask.name} | {pass_name} | {name} | n/a [{number}] | | | |")
                        continue
                    ms, mib = row
                    print(
                        f"| {seq_len} | {mask.name} | {pass_name} | {name} | {ms:.2f} | {ms / raw_ms:.2f} "
                        f"| {mib:.1f} | {mib / raw_mib:.2f} |",
                        flush=True,
                    )
    for reason, number in notes.items():
        print(f"\n[{number}] {reason}")
    report_targets(results, args.seq_lens)


def selections(args: argparse.Namespace) -> None:
    """The selections' table (andrea.bench.selections), and where each overtakes dense attention."""
    seq_lens = args.seq_lens if args.seq_lens != DEFAULT_SEQ_LENS else [1024, 4096, 16384]
    limit = int(args.memory_limit_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(
        f"# one attention layer, selections of keys vs dense: B=1 d_model=256 H=4 d=64, RoPE, sdpa; "
        f"{platform.processor() or platform.machine()}, {args.threads} threads, memory limit "
        f"{args.memory_limit_gib:g} GiB, torch {torch.__version__}\n"
    )
    cells = selection_table(seq_lens, args.repeats)
    print("\n## crossover (the first T at which a selection's layer is faster than the dense one)")
    print("\n".join(crossovers(cells, seq_lens)))


def report_targets(results, seq_lens) -> None:
    print("\n## targets")
    paired = {key[:3]: ratio for key, ratio in results.items() if key[3] == "sdpa / raw, paired"}
    for (seq_len, mask_kind, pass_name), ratio in paired.items():
        print(f"- sdpa backend / raw call, T={seq_len} {mask_kind} {pass_name}, median of paired rounds: {ratio:.3f}×")
    if paired:
        worst = max(paired.values())
        print(f"- worst: {worst:.3f}× (target <= 1.03×): {'met' if worst <= 1.03 else 'MISSED'}")
    longest = max(seq_lens)
    for mask_kind in ("causal", "sliding_window"):
        sdpa, eager = (results.get((longest, mask_kind, "fwd+bwd", name)) for name in ("sdpa", "eager"))
        if isinstance(sdpa, tuple) and isinstance(eager, tuple):
            factor = eager[1] / sdpa[1]
            print(
                f"- T={longest} {mask_kind} fwd+bwd memory, eager / sdpa: {factor:.1f}× (target >= 4×): "
                f"{'met' if factor >= 4 else 'MISSED'}"
            )


if __name__ == "__main__":
    main()
