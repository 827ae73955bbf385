"""Waiting for a device: GPU work is queued, so a wall clock read after it needs the queue drained."""

from __future__ import annotations

import torch


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait for the work queued on `device` (a no-op on a CPU); None: the current GPU, if there is one."""
    if device is None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    elif torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
