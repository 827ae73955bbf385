"""What a training step logs, kept on the device and read to the host once per logging step.

Every `.item()`, `float(tensor)` or `bool(tensor)` of a tensor on a GPU makes the host wait for the device and
empties the queue of kernels the GPU needs to stay busy. A step therefore only appends its numbers (the
loss over every process, the step's accuracy, whether the loss was finite) to a list of device tensors; on
a logging step (`trainer.log_every_n_steps`), before a checkpoint and at an epoch's end, the rows since the
last read are stacked and read in one transfer (`flush`). The curves keep every step; the loggers get the
logging step's own values, as Lightning's `on_step` logging would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class StepRow:
    step: int  # the global step the row's batch trained at (before its optimizer step)
    loss: float
    acc: float
    finite: bool


@dataclass
class StepMetrics:
    pending: list[tuple[int, Tensor]] = field(default_factory=list)  # (step, device row), not read yet
    read: list[StepRow] = field(default_factory=list)  # the rows of the last flush, until taken
    last: StepRow | None = None  # the newest row read: what the progress bar shows

    def add(self, step: int, loss: Tensor, acc: Tensor) -> None:
        """One step's numbers, on their device: nothing is read here."""
        loss = loss.detach().float()
        self.pending.append((step, torch.stack([loss, acc.float(), torch.isfinite(loss).float()])))

    def flush(self) -> list[StepRow]:
        """Read every pending row in one transfer; the rows (also kept for `take`), [] when none was pending."""
        if not self.pending:
            return []
        steps = [step for step, _ in self.pending]
        values = torch.stack([row for _, row in self.pending]).tolist()  # the one host read (a device tensor: a copy)
        self.pending = []
        rows = [StepRow(s, loss, acc, bool(finite)) for s, (loss, acc, finite) in zip(steps, values, strict=True)]
        self.read += rows
        self.last = rows[-1]
        return rows

    def take(self) -> list[StepRow]:
        """The rows read since the last take (RunStats' curve and speed), once."""
        rows, self.read = self.read, []
        return rows


def logs_now(step: int, every_n_steps: int) -> bool:
    """Whether the step that trains at global step `step` is a logging step (Lightning's own rule)."""
    return (step + 1) % max(every_n_steps, 1) == 0
