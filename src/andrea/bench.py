"""Measuring tools for the benchmarks in scripts/: side-by-side medians and peak memory.

Timings are taken in interleaved rounds (every candidate once per round, in a
fresh random order each round), so a noisy neighbour or the after-effects of
the previous candidate (freed memory, cold caches) fall on all candidates alike.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from andrea.torch_internals import allocations


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


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_ms(
    candidates: dict[str, Callable[[], object]], repeats: int, warmup: int = 1, seed: int = 0
) -> dict[str, float]:
    """Median wall time in ms of each candidate, measured in interleaved rounds."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    order, rng = list(candidates.items()), random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(order)
        for name, fn in order:
            _synchronize()
            start = time.perf_counter()
            fn()
            _synchronize()
            samples[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(times) for name, times in samples.items()}


def paired_ratio(a: Callable[[], object], b: Callable[[], object], rounds: int, seed: int = 0) -> float:
    """Median over `rounds` of time(a) / time(b), a and b run back to back in random order."""
    rng, ratios = random.Random(seed), []
    a(), b()  # warm-up
    for _ in range(rounds):
        pair = {"a": a, "b": b}
        times = {}
        for name in rng.sample(sorted(pair), 2):
            _synchronize()
            start = time.perf_counter()
            pair[name]()
            _synchronize()
            times[name] = time.perf_counter() - start
        ratios.append(times["a"] / times["b"])
    return statistics.median(ratios)
