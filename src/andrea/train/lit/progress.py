"""What a run shows while it trains: Rich's live bar on a terminal; piped (nohup, SLURM, a CI log),
a plain line every `every_n_steps` steps that never wraps; in a multirun job, nothing (its log has it)."""

from __future__ import annotations

import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback, ModelSummary
from lightning.pytorch.callbacks import RichProgressBar as _LightningRichProgressBar
from lightning.pytorch.callbacks.progress import ProgressBar
from lightning.pytorch.utilities.types import STEP_OUTPUT


class _ShowsStepMetrics(ProgressBar):
    """The newest step loss and accuracy the module read (andrea.train.lit.step_metrics), beside Lightning's
    metrics: the step's numbers bypass LightningModule.log, which would read them every step. Not the logger's
    version number (`v_num`), which says nothing about training: the summary names the run."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        last = getattr(getattr(pl_module, "step_metrics", None), "last", None)
        if last is not None:
            metrics |= {"train/loss_step": last.loss, "train/acc_step": last.acc}
        return metrics


class RichProgressBar(_ShowsStepMetrics, _LightningRichProgressBar):
    """Lightning's Rich bar, with the step's loss and accuracy (callbacks/rich_progress_bar.yaml)."""


class PlainProgressBar(_ShowsStepMetrics):
    """One line every `every_n_steps` optimisation steps and at each epoch's end: step, epoch, metrics."""

    def __init__(self, every_n_steps: int = 50) -> None:
        super().__init__()
        self.every_n_steps = every_n_steps
        self._enabled = True
        self._fresh_val = False  # a validation ended since the last line: its numbers are news

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        if self._enabled and trainer.global_step % self.every_n_steps == 0:
            self._line(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._enabled:
            self._line(trainer, pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fresh_val = not trainer.sanity_checking

    def _line(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The step's numbers; a validation's only on the first line after it (not repeated as news)."""
        metrics = self.get_metrics(trainer, pl_module)
        if not self._fresh_val:
            metrics = {k: v for k, v in metrics.items() if not k.startswith("val")}
        self._fresh_val = False
        shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items())
        total = trainer.max_steps if trainer.max_steps > 0 else _planned_steps(trainer)
        print(f"step {trainer.global_step}/{total} epoch {trainer.current_epoch} {shown}", flush=True)


def _planned_steps(trainer: L.Trainer) -> int | str:
    """The steps max_epochs makes, where Lightning can count them ("?" where it cannot: an endless run)."""
    steps = trainer.estimated_stepping_batches
    return int(steps) if steps != float("inf") else "?"


def progress_callbacks(callbacks: list[Callback], multirun: bool) -> tuple[list[Callback], dict[str, bool]]:
    """(callbacks, Trainer options) for where the output goes: the configured bar on a terminal, a
    PlainProgressBar in place of any other bar when stdout is piped, no bar and no model table in a
    multirun job."""
    others = [c for c in callbacks if not isinstance(c, ProgressBar)]
    if multirun:
        return others, {"enable_progress_bar": False, "enable_model_summary": False}
    # the model's table into the run's log, not onto the console (Lightning's own logger: andrea.cli.train's
    # quiet console keeps its info lines for the log file), unless the config has a summary of its own
    table = [] if any(isinstance(c, ModelSummary) for c in callbacks) else [ModelSummary(max_depth=1)]
    if sys.stdout.isatty() or any(isinstance(c, PlainProgressBar) for c in callbacks):
        return [*callbacks, *table], {}
    return [*others, PlainProgressBar(), *table], {}  # in place of Rich's bar, or of the TQDM bar Lightning adds
