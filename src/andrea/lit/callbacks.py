"""Callbacks that put attention on the dashboard: maps, head-role metrics, run statistics."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import lightning as L
import torch
from lightning.pytorch.loggers import Logger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities.types import STEP_OUTPUT
from torch import Tensor

from andrea.metrics import HEAD_ROLES
from andrea.metrics import verdict as verdicts
from andrea.models.network import network
from andrea.viz import SCALES, save_attention_grid

if TYPE_CHECKING:
    from andrea.lit.module import LanguageModelModule


class AttentionMaps(L.Callback):
    """Every `every_n_steps` optimisation steps and at the end of training: run the model on
    a few fixed validation rows, draw each chosen layer's heads for probe row `row` as a heatmap
    grid (PNG in `<run dir>/attention_maps/`, and to every logger that shows images), and log the
    head-role metrics of every layer and head.

    window: draw only the last `window` positions of a long context (null: all of them).
    scale:  the colour scale, named in the colour bar: log (weights near 1/T stay visible),
            row (each query row divided by its largest weight) or linear.
    Text models get their decoded tokens on both axes (up to 48 positions), others position ticks.
    On TensorBoard the head-role scalars are laid out one chart per role and layer, every head a
    line (the Custom Scalars tab); on wandb the same charts are logged at the end of training.
    """

    def __init__(
        self,
        every_n_steps: int = 50,
        layers: list[int] | None = None,
        probe_rows: int = 8,
        dirname: str = "attention_maps",
        row: int = 0,
        window: int | None = None,
        scale: str = "log",
    ) -> None:
        if every_n_steps <= 0:
            raise ValueError(f"callbacks.attention_maps.every_n_steps={every_n_steps} must be a positive integer")
        if not isinstance(row, int) or not 0 <= row < probe_rows:
            raise ValueError(f"callbacks.attention_maps.row={row!r} must be an integer in [0, probe_rows={probe_rows})")
        if window is not None and (not isinstance(window, int) or window < 2):
            raise ValueError(f"callbacks.attention_maps.window={window!r} must be an integer >= 2, or null")
        if scale not in SCALES:
            raise ValueError(f"callbacks.attention_maps.scale={scale!r} must be one of {', '.join(SCALES)}")
        self.every_n_steps, self.layers, self.probe_rows, self.dirname = every_n_steps, layers, probe_rows, dirname
        self.row, self.window, self.scale = row, window, scale
        self.out_dir: Path | None = None
        self.last_step = -1
        self.written: list[str] = []
        self.scores: dict[str, float] = {}  # "heads/<role>/L<l>H<h>" -> score, the applicable ones
        self.roles: dict[str, dict] = {}  # role -> its best head (andrea.metrics.verdict.summary)
        self.verdict: dict | None = None  # whether the head the task needs appeared
        self.history: list[tuple[int, dict[str, float]]] = []  # (step, scores) of every record, for grouped charts

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.out_dir = Path(trainer.default_root_dir) / self.dirname
        n_layer = getattr(pl_module.net, "n_layer", 0)
        bad = [layer for layer in self.layers or [] if not 0 <= layer < n_layer]
        if bad:
            raise ValueError(
                f"callbacks.attention_maps.layers={self.layers} names layers {bad}; the model has {n_layer}"
            )
        if stage == "fit" and trainer.is_global_zero and n_layer:
            n_head = network(pl_module.net).attention[0].heads.n_head  # type: ignore[arg-type]  # a zoo network
            pattern = getattr(trainer.datamodule, "attention_pattern", None)  # type: ignore[attr-defined]
            extra = pattern.role if pattern is not None and pattern.role not in (None, *HEAD_ROLES) else None
            roles = [*HEAD_ROLES, *([extra] if extra else [])]
            for logger in trainer.loggers:
                if isinstance(logger, TensorBoardLogger):
                    logger.experiment.add_custom_scalars(grouped_layout(roles, n_layer, n_head))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record(trainer, pl_module)  # the untrained heads, to compare against

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step % self.every_n_steps == 0:
            self.record(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record(trainer, pl_module)

    @torch.no_grad()
    def record(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        step = trainer.global_step
        if step == self.last_step or not trainer.is_global_zero:
            return
        self.last_step = step
        probe = trainer.datamodule.probe_batch(self.probe_rows)  # type: ignore[attr-defined]  # Lightning sets it
        input_ids = probe["input_ids"].to(pl_module.device)
        net = network(cast("LanguageModelModule", pl_module).net)  # the module this callback is written for
        was_training = pl_module.training
        pl_module.eval()
        _, weights = net(input_ids, return_weights=True)  # one (B, H, T, T) per layer
        pl_module.train(was_training)
        if not weights:  # a model without attention (the ablation): nothing to draw
            return
        self._log_scores(trainer, weights, input_ids.cpu(), step)
        layers = range(len(weights)) if self.layers is None else self.layers
        assert self.out_dir is not None  # set in setup(), before any training hook
        row_ids = input_ids[self.row].tolist()
        tokenizer = getattr(trainer.datamodule, "tokenizer", None)  # type: ignore[attr-defined]  # text data only
        tokens = [tokenizer.decode([i]).replace("\n", "⏎") for i in row_ids] if tokenizer is not None else None
        for layer in layers:
            path = self.out_dir / f"layer{layer}_step{step:06d}.png"
            mask_name = net.attention[layer].mask.name
            w = weights[layer][self.row].cpu()  # (H, T, T)
            start = max(0, w.shape[-1] - self.window) if self.window else 0
            title = f"layer {layer} · step {step} · {mask_name} · probe row {self.row}"
            save_attention_grid(w[:, start:, start:], path, title=title, scale=self.scale, start=start, tokens=tokens)
            self.written.append(str(path))
            for logger in trainer.loggers:
                _log_image(logger, f"attention/layer{layer}", path, step)

    def _log_scores(self, trainer: L.Trainer, weights: list[Tensor], input_ids: Tensor, step: int) -> None:
        pattern = getattr(trainer.datamodule, "attention_pattern", None)  # type: ignore[attr-defined]  # set by Lightning
        extra = (pattern.role,) if pattern is not None and pattern.role else ()
        scores = verdicts.score_heads(weights, input_ids, extra)
        self.scores = {
            f"heads/{role}/L{layer}H{head}": value
            for role, s in scores.items()
            for (layer, head), value in _enumerate_2d(s.values)
            if value == value  # NaN: not applicable to the probe, nothing to plot
        }
        self.roles = verdicts.summary(scores)
        self.verdict = verdicts.verdict(pattern, scores) if pattern is not None else None
        self.history.append((step, self.scores))
        for logger in trainer.loggers:
            logger.log_metrics(self.scores, step=step)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """wandb: one chart per role and layer, every head a line, from every record of the run."""
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and trainer.is_global_zero and self.history:
                logger.experiment.log(grouped_charts(self.history))


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
        _synchronize(pl_module.device)
        self._batch_start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        _synchronize(pl_module.device)  # GPU work is asynchronous: wait for the step to finish
        seconds = time.perf_counter() - self._batch_start
        tokens = batch["input_ids"].numel() * trainer.world_size
        self.tokens += tokens
        self.train_seconds += seconds
        tokens_per_s = tokens / max(seconds, 1e-9)
        self.step_rates.append(tokens_per_s)
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, Tensor):  # None: a skipped non-finite step
            self.train_curve.append((trainer.global_step, float(loss)))
        pl_module.log("train/tokens_per_s", tokens_per_s, on_step=True, on_epoch=False)
        flops_per_token = getattr(pl_module.net, "flops_per_token", None)
        if self.peak_tflops and flops_per_token:
            mfu = tokens_per_s * flops_per_token(batch["input_ids"].shape[1]) / (self.peak_tflops * 1e12)
            pl_module.log("train/mfu", mfu, on_step=True, on_epoch=False)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loss = trainer.callback_metrics.get("val/loss")
        if loss is None or trainer.sanity_checking:
            return
        if self.val_curve and self.val_curve[-1][0] == trainer.global_step:
            self.val_curve.pop()  # validated again at the same step (the final validation): the last figure
        self.val_curve.append((trainer.global_step, float(loss)))


def grouped_layout(roles: list[str], n_layer: int, n_head: int) -> dict:
    """TensorBoard's custom-scalar layout: a "head roles" category, one multi-line chart per role and
    layer whose lines are that layer's heads (tags heads/<role>/L<l>H<h>)."""
    charts = {
        f"{role} · layer {layer}": ["Multiline", [rf"heads/{role}/L{layer}H\d+$"]]
        for role in roles
        for layer in range(n_layer)
    }
    return {"head roles": charts}


def grouped_charts(history: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    """wandb line-series charts, key head_roles/<role>_L<l>: x = the step, a line per head."""
    import wandb

    series: dict[tuple[str, int], dict[int, list[tuple[int, float]]]] = {}
    for step, scores in history:
        for key, value in scores.items():
            _, role, head = key.split("/")
            layer, h = (int(x) for x in head[1:].split("H"))
            series.setdefault((role, layer), {}).setdefault(h, []).append((step, value))
    charts = {}
    for (role, layer), heads in sorted(series.items()):
        steps = sorted({step for points in heads.values() for step, _ in points})
        ys = [[dict(points).get(step, float("nan")) for step in steps] for _, points in sorted(heads.items())]
        keys = [f"H{h}" for h in sorted(heads)]
        title = f"{role} · layer {layer}"
        charts[f"head_roles/{role}_L{layer}"] = wandb.plot.line_series(steps, ys, keys=keys, title=title, xname="step")
    return charts


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _enumerate_2d(values: torch.Tensor) -> Iterator[tuple[tuple[int, int], float]]:
    for layer in range(values.shape[0]):
        for head in range(values.shape[1]):
            yield (layer, head), float(values[layer, head])


def _log_image(logger: Logger, key: str, path: Path, step: int) -> None:
    if isinstance(logger, WandbLogger):
        logger.log_image(key=key, images=[str(path)], step=step)
    elif isinstance(logger, TensorBoardLogger):
        import matplotlib.pyplot as plt

        image = plt.imread(path)[..., :3]  # (H, W, 3) floats in [0, 1]
        logger.experiment.add_image(key, image, global_step=step, dataformats="HWC")
