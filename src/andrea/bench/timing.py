"""Measuring tools for the benchmarks in scripts/: side-by-side medians and peak memory.

Timings are taken in interleaved rounds (every candidate once per round, in a
fresh random order each round), so a noisy neighbour or the after-effects of
the previous candidate (freed memory, cold caches) fall on all candidates alike.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from andrea.bench.torch_internals import allocations
from andrea.utils.devices import synchronize


def peak_memory_mib(fn: Callable[[], object], device: str = "cpu") -> float:
    """Peak extra memory, in MiB, that `fn` holds at once through torch's allocator.

    Read from the allocation and free events torch's profiler records (every
    allocation, a kernel's scratch space and compiled code's buffers included),
    replayed in time order. Memory allocated before the call is not counted.
    """
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities, profile_memory=True) as prof:
        fn()
    events = allocations(prof, torch.device(device).type)
    return max(itertools.accumulate((size for _, size in events), initial=0)) / 2**20


def round_ms(
    candidates: dict[str, Callable[[], object]], repeats: int, warmup: int = 1, seed: int = 0, best_of: int = 1
) -> dict[str, list[float]]:
    """Wall time in ms of each candidate in each of `repeats` interleaved rounds (round i of every
    candidate at index i, so two candidates' times pair up round by round). With `best_of` > 1 a
    candidate's time in a round is the fastest of that many calls back to back: a pause the machine
    imposes on one call (another process, page faults) then falls out instead of into the ratio."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    order, rng = list(candidates.items()), random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(order)
        for name, fn in order:
            samples[name].append(min(_time_ms(fn) for _ in range(best_of)))
    return samples


def _time_ms(fn: Callable[[], object]) -> float:
    synchronize()
    start = time.perf_counter()
    fn()
    synchronize()
    return (time.perf_counter() - start) * 1e3


def median_ms(
    candidates: dict[str, Callable[[], object]], repeats: int, warmup: int = 1, seed: int = 0
) -> dict[str, float]:
    """Median wall time in ms of each candidate, measured in interleaved rounds."""
    return {name: statistics.median(ms) for name, ms in round_ms(candidates, repeats, warmup, seed).items()}


def ratio_spread(a: list[float], b: list[float]) -> tuple[float, float]:
    """The median of the per-round ratios a[i] / b[i], and how far it can be trusted: half the width
    of its 95% confidence interval (distribution-free, from the order statistics), as a fraction of
    the median: 0.02 reads "+-2%". More rounds narrow it."""
    ratios = sorted(x / y for x, y in zip(a, b, strict=True))
    n, median = len(ratios), statistics.median(ratios)
    h = 1.96 * math.sqrt(n) / 2  # ranks n/2 -+ h (normal approximation to the binomial)
    lower, upper = max(1, math.floor(n / 2 - h)), min(n, math.ceil(1 + n / 2 + h))  # 1-based
    return median, (ratios[upper - 1] - ratios[lower - 1]) / 2 / median


def paired_ratio(a: Callable[[], object], b: Callable[[], object], rounds: int, seed: int = 0) -> float:
    """Median over `rounds` of time(a) / time(b), a and b run back to back in random order."""
    times = round_ms({"a": a, "b": b}, rounds, warmup=1, seed=seed)
    return ratio_spread(times["a"], times["b"])[0]
