"""RunStats: throughput (tokens/s, MFU) and the loss curves the sweep report overlays."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import lightning as L
from lightning.pytorch.utilities.types import STEP_OUTPUT

from andrea.train.lit.step_metrics import StepMetrics
from andrea.utils.devices import synchronize
from andrea.utils.rules import integer, number, read_list, read_value


class RunStats(L.Callback):
    """Training throughput and the loss curves a sweep report overlays: tokens/s over each logging interval
    (from the wall time between two logging steps, whose one read of the step numbers waits for the device
    anyway: logged; a median and its spread over the run), the model FLOPs utilisation (MFU) against
    `peak_tflops` when the model can count its FLOPs, the train loss of every step (read with the module's
    step numbers, andrea.train.lit.step_metrics) and the val loss of every validation. `final_train_loss` is
    the mean of the last FINAL_STEPS steps, not the epoch mean. Nothing here reads a tensor between two
    logging steps."""

    FINAL_STEPS = 20
    # In every checkpoint: a resumed run's curves and speed are the whole run's, the steps trained after the
    # checkpoint by the earlier attempt counted once (the later attempt's). A validation run after the checkpoint
    # an attempt resumes from (the epoch's last one is saved before its validation) is not among them.
    KEPT = ("tokens", "train_seconds", "step_rates", "train_curve", "val_curve")
    LATER = {"cpu_seconds": 0.0, "load": 0.0}  # kept too; absent from checkpoints written before them

    def __init__(self, peak_tflops: float | None = None) -> None:
        if peak_tflops is not None and peak_tflops <= 0:
            raise ValueError(f"callbacks.run_stats.peak_tflops={peak_tflops} must be > 0 (or null)")
        self.peak_tflops = peak_tflops
        self.tokens = 0
        self.train_seconds = 0.0
        self.cpu_seconds = 0.0  # the process's CPU time while training, all its threads
        self.load = 0.0  # the highest 1-minute load average seen at a logging step
        self._interval_start: float | None = None  # the wall time of the last logging step (or the first batch)
        self._interval_cpu = 0.0  # the process's CPU time then
        self._interval_tokens = 0
        self._seq_len = 0  # of the last batch: the FLOPs a token costs depend on it
        self.step_rates: list[float] = []  # tokens/s of each logging interval
        self.train_curve: list[tuple[int, float]] = []  # (step, train loss)
        self.val_curve: list[tuple[int, float]] = []  # (step, val loss)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    @property
    def tokens_per_cpu_s(self) -> float | None:
        """Tokens per second of the process's CPU time: what a busy machine's wall figure hides."""
        return self.tokens / self.cpu_seconds if self.cpu_seconds else None

    @property
    def load_max(self) -> dict[str, float]:
        return {"load": round(self.load, 2), "cores": float(os.cpu_count() or 1)}

    def rate_summary(self) -> dict[str, float] | None:
        """Median tokens/s over the logging intervals (the first left out as warm-up) and its spread: p25, p75."""
        rates = sorted(self.step_rates[1:] if len(self.step_rates) > 2 else self.step_rates)
        if not rates:
            return None
        q = statistics.quantiles(rates, n=4, method="inclusive") if len(rates) > 1 else [rates[0]] * 3
        return {"median": q[1], "p25": q[0], "p75": q[2]}

    @property
    def final_train_loss(self) -> float | None:
        last = [loss for _, loss in self.train_curve[-self.FINAL_STEPS :]]
        return sum(last) / len(last) if last else None

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in (*self.KEPT, *self.LATER)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The earlier attempts' numbers, checked as plain values (a crafted checkpoint poses nothing else)."""
        if not isinstance(state_dict, dict) or not set(self.KEPT) <= set(state_dict) <= {*self.KEPT, *self.LATER}:
            raise ValueError(f"the run stats must have the keys {', '.join(self.KEPT)}")
        for name, default in self.LATER.items():
            value = state_dict.get(name, default)
            setattr(self, name, float(read_value(value, number(0.0), f"the run stats' {name}")))
        self.tokens = read_value(state_dict["tokens"], integer(0), "the run stats' tokens")
        self.train_seconds = float(read_value(state_dict["train_seconds"], number(0.0), "the run stats' train_seconds"))
        rates = read_list(state_dict["step_rates"], "the run stats' step_rates")
        self.step_rates = [float(read_value(r, number(0.0), "the run stats' step_rates")) for r in rates]
        self.train_curve = _curve(state_dict["train_curve"], "train_curve")
        self.val_curve = _curve(state_dict["val_curve"], "val_curve")

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        """The checkpoint's copy of these numbers with the steps read for it too: a checkpoint is written after
        this callback's batch-end hook, and the steps' numbers it reads first (LastCheckpoint) would otherwise
        come after its state was taken, a gap in a resumed run's curve."""
        self._flush(trainer, pl_module)
        callbacks = checkpoint.get("callbacks")
        if isinstance(callbacks, dict) and self.state_key in callbacks:
            callbacks[self.state_key] = self.state_dict()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._interval_start is None:  # the first batch of this fit (or after a validation)
            synchronize(pl_module.device)
            self._interval_start, self._interval_cpu = time.perf_counter(), time.process_time()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        self._interval_tokens += batch["input_ids"].numel() * trainer.world_size
        self._seq_len = batch["input_ids"].shape[1]
        metrics: StepMetrics | None = getattr(pl_module, "step_metrics", None)
        rows = metrics.take() if metrics is not None else []
        if rows:  # the module read its steps' numbers in this step
            self._record(trainer, pl_module, rows)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._flush(trainer, pl_module)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._flush(trainer, pl_module)  # validation time is no training time
        self._interval_start = None

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._flush(trainer, pl_module)

    def _flush(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        flush, metrics = getattr(pl_module, "flush_step_metrics", None), getattr(pl_module, "step_metrics", None)
        if flush is None or metrics is None:
            return
        flush()
        rows = metrics.take()
        if rows:
            self._record(trainer, pl_module, rows)

    def _record(self, trainer: L.Trainer, pl_module: L.LightningModule, rows: list) -> None:
        """The rows just read: their losses on the curve, and the interval's speed (its wall time now ends)."""
        self.train_curve += [(row.step + 1, row.loss) for row in rows]  # the step count after the row's update
        if self._interval_start is None or not self._interval_tokens:
            return
        seconds = time.perf_counter() - self._interval_start  # the read just made waited for the device
        self.tokens += self._interval_tokens
        self.train_seconds += seconds
        self.cpu_seconds += time.process_time() - self._interval_cpu
        self.load = max(self.load, os.getloadavg()[0])
        tokens_per_s = self._interval_tokens / max(seconds, 1e-9)
        self.step_rates.append(tokens_per_s)
        self._interval_start, self._interval_cpu, self._interval_tokens = time.perf_counter(), time.process_time(), 0
        speed = {"train/tokens_per_s": tokens_per_s}
        flops_per_token = getattr(pl_module.net, "flops_per_token", None)
        if self.peak_tflops and flops_per_token and self._seq_len:
            speed["train/mfu"] = tokens_per_s * flops_per_token(self._seq_len) / (self.peak_tflops * 1e12)
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


def _curve(value: Any, name: str) -> list[tuple[int, float]]:
    """(step, loss) pairs, steps whole numbers in order; a loss is any float (a non-finite one is the run's)."""
    points = []
    for point in read_list(value, f"the run stats' {name}"):
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            raise ValueError(f"the run stats' {name} holds {str(point)[:60]}, not a (step, loss) pair")
        step, loss = point
        if not (_whole(step) and isinstance(loss, (int, float)) and not isinstance(loss, bool)):
            raise ValueError(f"the run stats' {name} holds {str(point)[:60]}, not a (step, loss) pair")
        points.append((step, float(loss)))
    return points


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
