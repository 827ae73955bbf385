"""What a result was measured on, kept in every result.json and sweep report row so that it can be reproduced:
andrea's commit (with `+changes` when its files differ from it), the versions of torch, triton and fla-core, the
CPU's model, torch's threads and the run's seed."""

from __future__ import annotations

import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = {"torch": "torch", "triton": "triton", "fla": "fla-core"}


def environment(seed: object = None) -> dict[str, Any]:
    import torch  # here: the sweep's report cells (describe) are read where torch is not imported yet

    return {
        "commit": commit(),
        **{name: _version(package) for name, package in PACKAGES.items()},
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "seed": seed,
    }


def commit() -> str | None:
    """The commit andrea's source is checked out at (short), `+changes` if tracked files differ; None outside git."""
    here = Path(__file__).resolve().parent
    try:
        head = _git(here, "rev-parse", "--short=12", "HEAD")
        changed = _git(here, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return head + ("+changes" if changed else "")


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=True, timeout=10)
    return done.stdout.strip()


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(record: dict[str, Any] | None) -> str:
    """One cell: `commit · torch 2.13.0 · 2 threads · seed 0`."""
    if not record:
        return ""
    parts = [record.get("commit") or "no commit", f"torch {record.get('torch')}"]
    parts += [f"{name} {record[name]}" for name in ("triton", "fla") if record.get(name)]
    return " · ".join([*parts, f"{record.get('threads')} threads", f"seed {record.get('seed')}"])
