"""Shared fixtures and the parity-matrix report printed at the end of every run."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(min(2, os.cpu_count() or 1))

# wandb: offline, quiet, and nothing written to HOME
_WANDB_HOME = tempfile.mkdtemp(prefix="andrea-tests-wandb-")
for _key, _value in {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "WANDB_DIR": _WANDB_HOME,
    "WANDB_CACHE_DIR": _WANDB_HOME,
    "WANDB_CONFIG_DIR": _WANDB_HOME,
    "WANDB_DATA_DIR": _WANDB_HOME,
}.items():
    os.environ[_key] = _value


def pytest_unconfigure(config):
    shutil.rmtree(_WANDB_HOME, ignore_errors=True)  # the run's wandb home goes with the run


settings.register_profile("andrea", deadline=None, max_examples=40, derandomize=True)
settings.load_profile("andrea")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_terminal_summary(terminalreporter):
    """List every parity cell: passed, failed, or unsupported with the backend's declared reason."""
    cells, reasons = {}, {}
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            props = dict(getattr(report, "user_properties", ()))
            if report.when != "call" or "parity_cell" not in props:
                continue
            backend, mask, heads, dtype, direction = props["parity_cell"]
            status = props.get("parity_status", "passed") if outcome == "passed" else "FAILED"
            if status.startswith("unsupported"):
                reasons.setdefault(status, len(reasons) + 1)
                status = f"n/a[{reasons[status]}]"
            cells[(backend, heads, dtype, direction, mask)] = "ok" if status == "passed" else status
    if not cells:
        return
    masks = list(dict.fromkeys(key[-1] for key in cells))
    rows = defaultdict(dict)
    for (backend, heads, dtype, direction, mask), status in cells.items():
        rows[(backend, heads, dtype, direction)][mask] = status
    write = terminalreporter.write_line
    terminalreporter.section("attention parity matrix (against naive)")
    width = max(len(m) for m in masks) + 1
    write(f"{'backend':8} {'heads':5} {'dtype':8} {'pass':8} " + "".join(f"{m:>{width}}" for m in masks))
    for key in sorted(rows):
        write(
            f"{key[0]:8} {key[1]:5} {key[2]:8} {key[3]:8} "
            + "".join(f"{rows[key].get(m, '-'):>{width}}" for m in masks)
        )
    counts = defaultdict(int)
    for status in cells.values():
        counts["passed" if status == "ok" else status.split("[")[0]] += 1
    write(f"{len(cells)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for reason, number in reasons.items():
        write(f"[{number}] {reason}")
