"""A callback for scripts/bench_startup.py: writes the clock time of a run's first training batch to a file."""

from __future__ import annotations

import time
from pathlib import Path

from lightning.pytorch import Callback


class FirstStep(Callback):
    def __init__(self, path: str) -> None:
        self.path, self.seen = Path(path), False

    def on_train_batch_start(self, *args: object) -> None:
        if not self.seen:
            self.seen = True
            self.path.write_text(repr(time.time()))
