"""Timing and memory helpers for scripts/bench_*.py (timing.py), and the private torch API they read."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:  # andrea.bench was one module: its names, for one more release
    from andrea.bench import timing

    if name.startswith("__") or not hasattr(timing, name):
        raise AttributeError(f"module 'andrea.bench' has no attribute {name!r}")
    warnings.warn(f"andrea.bench.{name} moved to andrea.bench.timing.{name}", DeprecationWarning, stacklevel=2)
    return getattr(timing, name)
