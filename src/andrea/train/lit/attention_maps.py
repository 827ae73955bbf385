"""AttentionMaps: what the heads do, on the dashboard, off the training thread.

At a record the training thread runs the probe forward (a few validation rows, no grad) and the
head-role metrics (milliseconds: torch ops, which stay on the training thread so that no second
thread pool competes with it for the cores), and hands the weights, as numpy arrays, to one
background worker that draws the PNGs (numpy and Pillow only) at the lowest CPU priority, in the
time training leaves the cores idle; the training thread gives finished maps to the loggers at its
next step. The queue is bounded: when the worker falls behind, a record's drawing is skipped and
counted (its head-role scores are kept), never the training step delayed. Pending maps are finished
before a checkpoint is written and before the run ends.

Records come at step 0, then `every_n_steps` apart with schedule=linear, or log-spaced with
schedule=log (the default): each gap doubles, never below `every_n_steps` (0, 50, 100, 200, 400,
... and the last step), so a long run draws tens of maps, not thousands.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import lightning as L
import torch
from lightning.pytorch.utilities.types import STEP_OUTPUT
from torch import Tensor

from andrea.data.tasks import Pattern
from andrea.lens import verdict as verdicts
from andrea.lens.circuit import traced_verdict
from andrea.lens.head_roles import HEAD_ROLES, first_token_mass
from andrea.lens.heads import RoleHead, metric_name
from andrea.lens.selection_maps import selection_maps
from andrea.lens.viz import MAPS_DIR
from andrea.models.network import Network, all_attention, network
from andrea.models.weight_styles import weight_styles
from andrea.train.lit import role_history
from andrea.train.lit.dashboards import History, dashboard
from andrea.train.lit.map_probe import Drawn, Probe, draw, lowest_priority, probe_job
from andrea.train.maps_settings import check_settings

if TYPE_CHECKING:
    from andrea.train.lit.module import LanguageModelModule


class AttentionMaps(L.Callback):
    """Draw each chosen layer's heads for probe row `row` as a heatmap grid (PNG in
    `<run dir>/attention_maps/`, and to every logger that shows images), and log the head-role
    metrics of every layer and head, at step 0, on the schedule, and at the end of training.

    window: draw only the last `window` positions of a long context (null: all of them).
    scale:  the colour scale, named in the colour bar: log (weights near 1/T stay visible),
            row (each query row divided by its largest weight) or linear.
    Text models get their decoded tokens on both axes (up to 48 positions), others position ticks. The
    head-role scalars: one chart per role and layer, every head a line (TensorBoard's Custom Scalars
    tab; on wandb, logged at the end of training).
    """

    def __init__(
        self,
        every_n_steps: int = 50,
        layers: list[int] | None = None,
        probe_rows: int = 8,
        dirname: str = MAPS_DIR,
        row: int = 0,
        window: int | None = None,
        scale: str = "log",
        schedule: str = "log",
        max_pending: int = 8,
    ) -> None:
        settings = dict(every_n_steps=every_n_steps, probe_rows=probe_rows, row=row, window=window, scale=scale)
        problem = check_settings(settings | dict(schedule=schedule, max_pending=max_pending))  # train.maps_settings
        if problem:
            raise ValueError(problem)
        self.every_n_steps, self.layers, self.probe_rows, self.dirname = every_n_steps, layers, probe_rows, dirname
        self.row, self.window, self.scale, self.schedule = row, window, scale, schedule
        self.max_pending = max_pending
        self.out_dir: Path | None = None
        self.last_step, self.next_step = -1, 0
        self.previous_step = -1  # the record before the last
        self.written: list[str] = []
        self.skipped = 0  # records dropped because the worker was behind
        self.scores: dict[RoleHead, float] = {}  # (role, layer, head) -> score, the applicable ones
        self.roles: dict[str, dict] = {}  # role -> its best head (andrea.lens.verdict.summary)
        self.verdict: dict | None = None  # whether the head the task needs appeared
        self.verdict_step: int | None = None  # the first record at which it had
        self.verdict_cadence: int | None = None  # and the steps since the record before it: met within that many
        self.first_token_mass: list[float] | None = None  # per layer, the raw weight on key 0 (the sink)
        self.history: History = []  # (step, scores) of every record, for grouped charts
        self._worker: ThreadPoolExecutor | None = None
        self._pending: list[Future[Drawn]] = []
        self._undrawn: Probe | None = None  # the last record the worker had no room for

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.out_dir = Path(trainer.default_root_dir) / self.dirname
        n_layer = getattr(pl_module.net, "n_layer", 0)
        bad = [layer for layer in self.layers or [] if not 0 <= layer < n_layer]
        if bad:
            raise ValueError(
                f"callbacks.attention_maps.layers={self.layers} names layers {bad}; the model has {n_layer}"
            )
        if stage == "fit" and trainer.is_global_zero and n_layer:
            pattern = _pattern(trainer)
            roles = list(dict.fromkeys([*HEAD_ROLES, *_task_roles(pattern)]))
            for logger in trainer.loggers:
                dashboard(logger).layout(roles, n_layer)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.next_step = trainer.global_step  # a resumed run records where it starts
        if trainer.is_global_zero:
            role_history.start(Path(trainer.default_root_dir) / role_history.HISTORY_FILE, trainer.global_step)
        self.record(trainer, pl_module)  # the untrained heads, to compare against

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step >= self.next_step:
            self.record(trainer, pl_module)
        self.deliver(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.deliver(trainer, wait=True)  # the maps and scalars up to this step are on disk with it

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record(trainer, pl_module, always=True)
        self.deliver(trainer, wait=True)  # the summary reads the last record's roles and verdict

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """wandb: one chart per role and layer, every head a line, from every record of the run."""
        self.deliver(trainer, wait=True)
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                dashboard(logger).role_charts(self.history)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.deliver(trainer, wait=True)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    def next_record(self, step: int) -> int:
        """The step of the record after one at `step`: every_n_steps on, or (log) as far again, at least that."""
        gap = max(self.every_n_steps, step) if self.schedule == "log" else self.every_n_steps
        return step + gap

    @torch.no_grad()
    def record(self, trainer: L.Trainer, pl_module: L.LightningModule, always: bool = False) -> None:
        """The probe forward, here; everything else on the worker (or skipped, if it is behind)."""
        step = trainer.global_step
        if not trainer.is_global_zero:
            return
        if step == self.last_step:  # recorded at this step already
            self._finish_undrawn(step, always)
            return
        self.next_step = self.next_record(step)
        self.previous_step, self.last_step = self.last_step, step
        probe = trainer.datamodule.probe_batch(self.probe_rows)  # type: ignore[attr-defined]  # Lightning sets it
        input_ids = probe["input_ids"].to(pl_module.device)
        net = network(cast("LanguageModelModule", pl_module).net)  # the module this callback is written for
        was_training = pl_module.training
        pl_module.eval()
        _, weights = net(input_ids, return_weights=True)  # one (B, H, T, T) per layer
        if not weights:  # a model without attention (the ablation): nothing to draw
            pl_module.train(was_training)
            return
        styles = weight_styles(net)
        normalised = all(style.rows_sum_to_one for style in styles)
        scores = self._score(trainer, weights, input_ids, step, normalised)
        self.first_token_mass = first_token_mass(weights, [style.first_token_as_share for style in styles])
        if always:
            self._trace(trainer, net, input_ids, scores, normalised)
        selected = selection_maps(net, input_ids)  # a layer that chooses its keys: drawn over its dense map
        pl_module.train(was_training)
        tokenizer = getattr(trainer.datamodule, "tokenizer", None)  # type: ignore[attr-defined]  # text data only
        row_ids = input_ids[self.row].tolist()
        job = probe_job(net, weights, row_ids, self.row, tokenizer, step, self.window, self.layers, selected)
        self._hand_over(job, always)

    def _hand_over(self, job: Probe, always: bool) -> None:
        """The job to the worker, unless it is max_pending records behind (always: the last one waits for it)."""
        if not always and len([f for f in self._pending if not f.done()]) >= self.max_pending:
            self.skipped += 1  # the worker is behind: this record's scores are kept, its drawing is not
            self._undrawn = job  # (unless training ends at this step: on_train_end draws it)
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="andrea-maps", initializer=lowest_priority)
        self._pending.append(self._worker.submit(self._draw, job))

    def _finish_undrawn(self, step: int, always: bool) -> None:
        """At the end of training, the drawing skipped at this same step, after all."""
        undrawn, self._undrawn = self._undrawn, None
        if always and undrawn is not None and undrawn.step == step:
            self.skipped -= 1
            self._hand_over(undrawn, always=True)

    def _trace(
        self, trainer: L.Trainer, net: Network, input_ids: Tensor, scores: dict[str, verdicts.RoleScores],
        normalised: bool,
    ) -> None:  # fmt: skip
        """The circuit behind a verdict met: the earlier head each head of the role reads (read from attention's
        weight matrices, so for a network with attention in every layer)."""
        pattern = _pattern(trainer)
        if pattern is not None and self.verdict and self.verdict["appeared"] and all_attention(net):
            self.verdict = traced_verdict(net, input_ids, pattern, scores, normalised)

    def _score(
        self, trainer: L.Trainer, weights: list[Tensor], input_ids: Tensor, step: int, normalised: bool
    ) -> dict[str, verdicts.RoleScores]:
        """The head-role metrics and the verdict of this record, logged at once."""
        pattern = _pattern(trainer)
        scores = verdicts.score_heads(weights, input_ids, _task_roles(pattern), rows_sum_to_one=normalised)
        self.scores = {
            (role, layer, head): float(s.values[layer, head])
            for role, s in scores.items()
            for layer in range(s.values.shape[0])
            for head in range(s.values.shape[1])
            if not s.values[layer, head].isnan()  # not applicable to the probe: nothing to plot
        }
        self.roles = verdicts.summary(scores, pattern)
        self.verdict = verdicts.verdict(pattern, scores) if pattern is not None else None
        if self.verdict_step is None and self.verdict is not None and self.verdict["appeared"]:
            self.verdict_step = step
            self.verdict_cadence = step - max(self.previous_step, 0)
        self._keep(trainer, step)
        return scores

    def _keep(self, trainer: L.Trainer, step: int) -> None:
        """This record's scores into the history, head_roles.csv and every logger (named as metrics there)."""
        self.history.append((step, self.scores))
        role_history.append(Path(trainer.default_root_dir) / role_history.HISTORY_FILE, step, self.scores)
        for logger in trainer.loggers:
            logger.log_metrics({metric_name(key): score for key, score in self.scores.items()}, step=step)

    def _draw(self, job: Probe) -> Drawn:
        assert self.out_dir is not None  # set in setup(), before any training hook
        return draw(job, self.out_dir, self.row, self.scale)

    def deliver(self, trainer: L.Trainer, wait: bool = False) -> None:
        """Hand every finished map (all of them, with wait) to the loggers, in step order."""
        while self._pending and (wait or self._pending[0].done()):
            drawn = self._pending.pop(0).result()
            for drawn_map in drawn.maps:
                self.written.append(str(drawn_map.path))
                for logger in trainer.loggers:
                    dashboard(logger).image(f"attention/layer{drawn_map.layer}", drawn_map, drawn.step)


def _pattern(trainer: L.Trainer) -> Pattern | None:
    return getattr(trainer.datamodule, "attention_pattern", None)  # type: ignore[attr-defined]  # set by Lightning


def _task_roles(pattern: Pattern | None) -> tuple[str, ...]:
    """The role the task's pattern needs, scored beside HEAD_ROLES (lookback_k for k > 1 is not among them)."""
    return (pattern.role,) if pattern is not None and pattern.role else ()
