"""What a training step logs, kept on the device and read to the host once per logging step.

Every `.item()`, `float(tensor)` or `bool(tensor)` of a tensor on a GPU makes the host wait for the device and
empties the queue of kernels the GPU needs to stay busy. A step therefore only appends its numbers (the
loss over every process, its hits and scored tokens) to a list of device tensors; on
a logging step (`trainer.log_every_n_steps`), before a checkpoint and at an epoch's end, the rows since the
last read are stacked and read in one transfer (`flush`). The curves keep every step; the loggers get the
logging step's own values, as Lightning's `on_step` logging would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class StepRow:
    step: int  # the global step the row's batch trained at (before its optimizer step)
    loss: float  # the mean over every process
    acc: float  # this process's hits over its scored tokens
    finite: bool  # whether the loss was finite


@dataclass
class StepMetrics:
    # (step, (loss, hits, scored tokens)) on the device, not read yet: a step appends and runs no op of its own
    pending: list[tuple[int, tuple[Tensor, Tensor, Tensor]]] = field(default_factory=list)
    read: list[StepRow] = field(default_factory=list)  # the rows of the last flush, until taken
    last: StepRow | None = None  # the newest row read: what the progress bar shows
    epoch: list[float] = field(default_factory=lambda: [0.0] * 4)  # this epoch's loss sum, steps, hits, scored

    def add(self, step: int, loss: Tensor, hits: Tensor, scored: Tensor) -> None:
        """One step's numbers, on their device: nothing is read here."""
        self.pending.append((step, (loss, hits, scored)))

    def flush(self) -> list[StepRow]:
        """Read every pending row in one transfer and add them to the epoch's sums; the rows (also kept for
        `take`), [] when none was pending."""
        if not self.pending:
            return []
        steps = [step for step, _ in self.pending]
        numbers = [number.float() for _, row in self.pending for number in row]  # counts exact to 2**24 a step
        values = torch.stack(numbers).view(-1, 3).tolist()  # the one host read (a device tensor: a copy)
        self.pending = []
        rows = [StepRow(s, loss, hits / max(scored, 1.0), math.isfinite(loss)) for s, (loss, hits, scored) in
                zip(steps, values, strict=True)]  # fmt: skip
        for loss, hits, scored in values:
            self.epoch = [total + x for total, x in zip(self.epoch, (loss, 1.0, hits, scored), strict=True)]
        self.read += rows
        self.last = rows[-1]
        return rows

    def take(self) -> list[StepRow]:
        """The rows read since the last take (RunStats' curve and speed), once."""
        rows, self.read = self.read, []
        return rows

    def new_epoch(self) -> None:
        """Start the epoch's sums again (a resumed epoch: from where it resumes)."""
        self.epoch = [0.0] * 4


def logs_now(step: int, every_n_steps: int) -> bool:
    """Whether the step that trains at global step `step` is a logging step (Lightning's own rule)."""
    return (step + 1) % max(every_n_steps, 1) == 0
