"""RunStats: throughput (tokens/s, MFU) and the loss curves the sweep report overlays."""

from __future__ import annotations

import statistics
import time
from typing import Any

import lightning as L
from lightning.pytorch.utilities.types import STEP_OUTPUT
from torch import Tensor

from andrea.utils.devices import synchronize


class RunStats(L.Callback):
    """Training throughput and the loss curves a sweep report overlays: tokens/s every step (logged;
    a median and its spread over the run), the model FLOPs utilisation (MFU) against `peak_tflops`
    when the model can count its FLOPs, the train loss of every step and the val loss of every
    validation. `final_train_loss` is the mean of the last FINAL_STEPS steps, not the epoch mean."""

    FINAL_STEPS = 20

    def __init__(self, peak_tflops: float | None = None) -> None:
        if peak_tflops is not None and peak_tflops <= 0:
            raise ValueError(f"callbacks.run_stats.peak_tflops={peak_tflops} must be > 0 (or null)")
        self.peak_tflops = peak_tflops
        self.tokens = 0
        self.train_seconds = 0.0
        self._batch_start = 0.0
        self.step_rates: list[float] = []  # tokens/s of each step
        self.train_curve: list[tuple[int, float]] = []  # (step, train loss)
        self.val_curve: list[tuple[int, float]] = []  # (step, val loss)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    def rate_summary(self) -> dict[str, float] | None:
        """Median tokens/s over the steps (the first left out as warm-up) and its spread: p25 and p75."""
        rates = sorted(self.step_rates[1:] if len(self.step_rates) > 2 else self.step_rates)
        if not rates:
            return None
        q = statistics.quantiles(rates, n=4, method="inclusive") if len(rates) > 1 else [rates[0]] * 3
        return {"median": q[1], "p25": q[0], "p75": q[2]}

    @property
    def final_train_loss(self) -> float | None:
        last = [loss for _, loss in self.train_curve[-self.FINAL_STEPS :]]
        return sum(last) / len(last) if last else None

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        synchronize(pl_module.device)
        self._batch_start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        synchronize(pl_module.device)  # GPU work is asynchronous: wait for the step to finish
        seconds = time.perf_counter() - self._batch_start
        tokens = batch["input_ids"].numel() * trainer.world_size
        self.tokens += tokens
        self.train_seconds += seconds
        tokens_per_s = tokens / max(seconds, 1e-9)
        self.step_rates.append(tokens_per_s)
        # the loss over every process (the module's global_loss), as the loggers get it; a bare loss otherwise
        loss = outputs.get("global_loss", outputs.get("loss")) if isinstance(outputs, dict) else outputs
        if isinstance(loss, Tensor):  # None: a skipped non-finite step
            self.train_curve.append((trainer.global_step, float(loss)))
        speed = {"train/tokens_per_s": tokens_per_s}
        flops_per_token = getattr(pl_module.net, "flops_per_token", None)
        if self.peak_tflops and flops_per_token:
            speed["train/mfu"] = tokens_per_s * flops_per_token(batch["input_ids"].shape[1]) / (self.peak_tflops * 1e12)
        if trainer.is_global_zero:  # straight to the loggers: LightningModule.log costs a millisecond a call
            for logger in trainer.loggers:
                logger.log_metrics(speed, step=trainer.global_step)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loss = trainer.callback_metrics.get("val/loss")
        if loss is None or trainer.sanity_checking:
            return
        if self.val_curve and self.val_curve[-1][0] == trainer.global_step:
            self.val_curve.pop()  # validated again at the same step (the final validation): the last figure
        self.val_curve.append((trainer.global_step, float(loss)))
