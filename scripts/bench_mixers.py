"""What each token mixer costs as T grows, beside softmax attention on sdpa: a table and a plot.

    python scripts/bench_mixers.py                                   # about 5 min on 2 CPU threads
    python scripts/bench_mixers.py --seq-lens 256 1024 --repeats 1 --plot /tmp/mixers.png

One layer, B=1, d_model=256 in 4 heads (each mixer with its published defaults, n_head=4), float32 on CPU:

    training   forward+backward of the chunked form (attention: the sdpa block) against T: median ms in
               interleaved rounds, and the peak memory torch allocates for one call
    forms      parallel vs chunked vs recurrent forward+backward at T=2048 (--forms-at)
    decode     one token's step from a cache holding T tokens: median ms, and the bytes the cache keeps
               (a state: flat in T; a KV cache: growing)

and reports the targets set for the token mixers, met or not, with the numbers: the chunked form grows linearly
(16k at most 4.5x 4k), trains at least 10x faster than the recurrent form at 2048, and beats sdpa at 8k.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable

import torch
from torch import nn

from andrea.attention import MultiHeadSelfAttention
from andrea.bench.timing import median_ms, peak_memory_mib
from andrea.mixers.layers import ATTENTION, mixer_registry

D_MODEL, N_HEAD = 256, 4
SDPA = "attention (sdpa)"


def build(name: str, T: int, form: str = "chunked") -> nn.Module:
    torch.manual_seed(0)
    if name == SDPA:
        return MultiHeadSelfAttention(D_MODEL, N_HEAD, backend="sdpa", mask="causal", max_context=T)
    return mixer_registry.load(name)(d_model=D_MODEL, max_context=T, n_head=N_HEAD, form=form)


def train_step(layer: nn.Module, T: int) -> Callable[[], object]:
    x = torch.randn(1, T, D_MODEL, requires_grad=True)

    def step() -> None:
        y, _ = layer(x)
        y.sum().backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    return step


def decode_step(layer: nn.Module, T: int) -> tuple[Callable[[], object], int]:
    """One token's step after a prefill of T tokens (the cache restored each call), and the cache's bytes."""
    with torch.no_grad():
        cache = layer.new_cache()
        layer(torch.randn(1, T, D_MODEL), cache=cache)
    token = torch.randn(1, 1, D_MODEL)
    saved = _snapshot(cache)

    @torch.no_grad()
    def step() -> None:
        _restore(cache, saved)
        layer(token, cache=cache)

    return step, layer.cache_size().at(T) * 4  # float32 numbers


def _snapshot(cache: object) -> dict:
    return {key: (value.copy() if isinstance(value, dict) else value) for key, value in vars(cache).items()}


def _restore(cache: object, saved: dict) -> None:
    for key, value in saved.items():
        setattr(cache, key, value.copy() if isinstance(value, dict) else value)


def training(
    names: list[str], seq_lens: list[int], repeats: int, attention_up_to: int
) -> dict[str, dict[int, tuple[float, float]]]:
    """name -> T -> (median ms, peak MiB) of forward+backward; sdpa up to `attention_up_to` tokens (causal, it runs
    its fused CPU kernel: 16k takes a few seconds and under 200 MiB)."""
    found: dict[str, dict[int, tuple[float, float]]] = {name: {} for name in names}
    for T in seq_lens:
        steps = {name: train_step(build(name, T), T) for name in names if name != SDPA or attention_up_to >= T}
        times = median_ms(steps, repeats)
        for name, step in steps.items():
            found[name][T] = (times[name], peak_memory_mib(step))
        print(f"  T={T}: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in times.items()), flush=True)
    return found


def forms(names: list[str], T: int, repeats: int) -> dict[str, dict[str, float]]:
    """name -> form -> median ms of forward+backward at T."""
    found = {}
    for name in names:
        steps = {form: train_step(build(name, T, form), T) for form in ("parallel", "chunked", "recurrent")}
        found[name] = median_ms(steps, repeats)
        print(f"  {name}: " + ", ".join(f"{form} {ms:.0f} ms" for form, ms in found[name].items()), flush=True)
    return found


def decoding(names: list[str], seq_lens: list[int], repeats: int) -> dict[str, dict[int, tuple[float, int]]]:
    """name -> T -> (median ms of one token's step, cache bytes)."""
    found: dict[str, dict[int, tuple[float, int]]] = {name: {} for name in names}
    for T in seq_lens:
        built = {name: decode_step(build(name, T + 1), T) for name in names}
        times = median_ms({name: step for name, (step, _) in built.items()}, repeats * 3)
        for name, (_, size) in built.items():
            found[name][T] = (times[name], size)
    return found


def crossover(train: dict[str, dict[int, tuple[float, float]]], name: str) -> int | None:
    """The shortest T from which the mixer's training step is faster than sdpa's at every longer T measured."""
    lengths = sorted(set(train[name]) & set(train[SDPA]))
    faster = [train[name][T][0] < train[SDPA][T][0] for T in lengths]
    for i, T in enumerate(lengths):
        if all(faster[i:]):
            return T
    return None


def report(names, train, by_form, decode, args) -> None:
    lengths = sorted(next(iter(train.values())))
    print(f"\n## Training: forward+backward, median ms (peak MiB), B=1, d_model={D_MODEL}, {N_HEAD} heads")
    print("| mixer | " + " | ".join(f"T={T}" for T in lengths) + " | faster than sdpa from |")
    print("|---|" + "---:|" * len(lengths) + "---|")
    for name in names:
        cells = " | ".join(f"{train[name][T][0]:,.0f} ({train[name][T][1]:,.0f})" if T in train[name] else "not run"
                           for T in lengths)  # fmt: skip
        cross = "" if name == SDPA else (f"T={crossover(train, name)}" if crossover(train, name) else "not here")
        print(f"| {name} | {cells} | {cross} |")
    print(f"\n## Forms at T={args.forms_at}: forward+backward, median ms")
    print("| mixer | parallel | chunked | recurrent | recurrent / chunked |\n|---|---:|---:|---:|---:|")
    for name, ms in by_form.items():
        print(f"| {name} | {ms['parallel']:,.0f} | {ms['chunked']:,.0f} | {ms['recurrent']:,.0f} | "
              f"{ms['recurrent'] / ms['chunked']:.1f}x |")  # fmt: skip
    print("\n## Decoding one token from a cache of T tokens: median ms (cache KiB)")
    print("| mixer | " + " | ".join(f"T={T}" for T in sorted(next(iter(decode.values())))) + " |")
    print("|---|" + "---:|" * len(next(iter(decode.values()))) + "")
    for name in names:
        cells = " | ".join(f"{ms:.2f} ({size / 1024:,.0f})" for _, (ms, size) in sorted(decode[name].items()))
        print(f"| {name} | {cells} |")
    targets(names, train, by_form)


def targets(names, train, by_form) -> None:
    print("\n## Targets")
    lengths = sorted(next(iter(train.values())))
    mixers = [name for name in names if name != SDPA]
    if 4096 in lengths and 16384 in lengths:
        growth = {name: train[name][16384][0] / train[name][4096][0] for name in mixers}
        met = all(g <= 4.5 for g in growth.values())
        print(
            f"- chunked 16k / 4k <= 4.5: {'met' if met else 'NOT met'} ("
            + ", ".join(f"{n} {g:.1f}x" for n, g in growth.items())
            + ")"
        )
    speedup = {name: ms["recurrent"] / ms["chunked"] for name, ms in by_form.items()}
    print(f"- chunked >= 10x faster than recurrent: {'met' if all(s >= 10 for s in speedup.values()) else 'NOT met'} ("
          + ", ".join(f"{n} {s:.1f}x" for n, s in speedup.items()) + ")")  # fmt: skip
    if 8192 in lengths:
        beat = {name: train[SDPA][8192][0] / train[name][8192][0] for name in mixers}
        met = all(b > 1 for b in beat.values())
        print(
            f"- chunked beats sdpa at 8k: {'met' if met else 'NOT met'} ("
            + ", ".join(f"{n} {b:.2f}x sdpa's speed" for n, b in beat.items())
            + ")"
        )


def plot(names, train, decode, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    panels = (
        (train, 0, 1, "training step (forward+backward)", "ms"),
        (decode, 0, 1, "decoding one token after T", "ms"),
        (decode, 1, 2**20, "cache per sequence", "MiB"),
    )
    for axis, (found, field, unit, title, label) in zip(axes, panels, strict=True):
        for name in names:
            lengths = sorted(found[name])
            style = dict(marker="o", linewidth=2.5 if name == SDPA else 1.5, color="black" if name == SDPA else None)
            axis.plot(lengths, [found[name][T][field] / unit for T in lengths], label=name, **style)
        axis.set(xscale="log", yscale="log", xlabel="T (tokens)", ylabel=label, title=title)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"one layer, B=1, d_model={D_MODEL}, {N_HEAD} heads, float32, CPU ({torch.get_num_threads()} threads)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[256, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--decode-lens", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--forms-at", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--attention-up-to", type=int, default=16384, help="the longest T sdpa trains at")
    parser.add_argument("--plot", default="docs/mixers_bench.png")
    args = parser.parse_args()
    names = [name for name in mixer_registry.builtins if name != ATTENTION] + [SDPA]  # the built-ins
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")
    print("training ...", flush=True)
    train = training(names, args.seq_lens, args.repeats, args.attention_up_to)
    print("forms ...", flush=True)
    by_form = forms([name for name in names if name != SDPA], args.forms_at, args.repeats)
    print("decoding ...", flush=True)
    decode = decoding(names, args.decode_lens, args.repeats)
    report(names, train, by_form, decode, args)
    plot(names, train, decode, args.plot)


if __name__ == "__main__":
    main()
