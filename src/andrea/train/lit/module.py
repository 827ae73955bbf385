"""LanguageModelModule: next-token (or per-position) cross-entropy for any model of the zoo."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.utilities.types import OptimizerLRScheduler
from torch import Tensor, nn

from andrea.core.own_loss import freeze_the_rest, learners, own_losses
from andrea.data.catalog import CHECKPOINT_TASK_KEY, task_record
from andrea.data.tasks import IGNORE_INDEX
from andrea.lens.interventions import install, parse_heads
from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, CHECKPOINT_TOKENIZER_KEY
from andrea.models.files.formats import CHECKPOINT_FORMAT_KEY, FORMAT
from andrea.models.network import heads_shape, network
from andrea.train.lit.finite_watch import FiniteWatch
from andrea.train.lit.lightning_internals import log_every_n_steps
from andrea.train.lit.step_metrics import StepMetrics, StepRow, logs_now
from andrea.train.lit.val_metrics import MAIN, SetMetrics, set_names


def next_token_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy of logits (B, T, V) against labels (B, T), IGNORE_INDEX positions left out."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (model.nonfinite=stop)."""


class LanguageModelModule(L.LightningModule):
    """Wraps `net` (idx (B, T) -> logits (B, T, V), weights) with loss, metrics and optimisation.

    optimizer: a partial taking `params` (Hydra `_partial_: true`), e.g. AdamW with its lr.
    scheduler: an optional partial taking `optimizer`, stepped every optimisation step.
    compile:   run the network's forward through torch.compile, one static graph per input shape (the
               saved weights keep their names).
    nonfinite: what a NaN or infinite training loss does: "stop" (raise NonFiniteLossError at the next
               logging step or checkpoint, whichever comes first: the check is read with the logged
               numbers, never alone; the last checkpoint, written before, stays the last good one) or
               "skip" (no update for that batch, counted in train/skipped_steps: this reads the loss
               to the host every step, the one per-step wait for the device a run then has).
    ablate:    heads zeroed in every forward, training and evaluation alike (["L0H1", "L1H3"]:
               andrea.lens.interventions), to see what the network does without them.
    Weight decay applies to matrices only; norms and biases are left undecayed (nanoGPT's groups).
    """

    _forward_net: Callable[[Tensor], tuple[Tensor, list[Tensor]]]  # `net`, or its torch.compile wrapper

    def __init__(
        self,
        net: nn.Module,
        optimizer: Callable,
        scheduler: Callable | None = None,
        net_config: dict | None = None,
        compile: bool = False,
        nonfinite: str = "stop",
        ablate: list[str] | None = None,
    ) -> None:
        super().__init__()
        if nonfinite not in ("stop", "skip"):
            raise ValueError(f"model.nonfinite={nonfinite!r} must be stop or skip")
        self.nonfinite, self.skipped_steps = nonfinite, 0
        self.step_metrics = StepMetrics()
        self.net = net
        self.frozen = freeze_the_rest(net)  # a part that learns alone for a while (DSA's dense warm-up)
        self.own_loss_parts = learners(net)  # the parts with a loss of their own (DSA's indexers), found once
        self.finite_watch = FiniteWatch(net)  # names the layer where a non-finite loss began
        if ablate:
            zeroed = parse_heads(ablate, *heads_shape(network(net)), key="model.ablate")
            install(network(net), dict.fromkeys(zeroed, 0.0))
        # Not registered as a submodule: checkpoints keep the plain `net.*` names. dynamic=False: a graph
        # per input shape; torch's automatic dynamic shapes would trace a second shape's backward
        # symbolically, and inductor fails on the sparse lookup gradient there (GPT's sparse_grad).
        compiled = torch.compile(net, dynamic=False) if compile else net
        object.__setattr__(self, "_forward_net", compiled)
        self.net_config = net_config  # the resolved model.net config, saved in every checkpoint
        self.tokenizer: str | None = None  # the data's tokenizer name, saved too (andrea-sample reads it)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self._matrices = {f"net.{n}" for n, p in net.named_parameters() if p.dim() >= 2}  # weight decay
        self.val_metrics = nn.ModuleDict({MAIN: SetMetrics(network(net).vocab_size)})  # + the data's eval sets

    def forward(self, input_ids: Tensor) -> Tensor:
        return self._forward_net(input_ids)[0]

    def _loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        logits = self(batch["input_ids"])  # (B, T, V)
        labels = batch["labels"]  # (B, T), IGNORE_INDEX where nothing is predicted
        loss = next_token_loss(logits, labels)
        return loss, logits, labels

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor] | None:
        self.finite_watch.at(self.global_step, self.device)
        loss, logits, labels = self._loss(batch)
        if self.nonfinite == "skip" and not self._finite_everywhere(loss):  # every process takes the same branch
            self.skipped_steps += 1
            return None  # Lightning makes no backward and no optimizer step for this batch
        # the step's hits (a prediction never equals IGNORE_INDEX) and scored tokens, kept on the device with the
        # loss until a logging step reads them (StepMetrics): an op of its own per number would cost more than
        # the numbers, and LightningModule.log about a millisecond a call
        hits = (logits.detach().argmax(dim=-1) == labels).sum()
        scored = (labels != IGNORE_INDEX).sum()
        # DDP: the global mean over the processes (one all-reduce; the loss itself for one process), for the loggers
        # and for RunStats' curves and summary alike
        global_loss = self.trainer.strategy.reduce(loss.detach(), reduce_op="mean")
        self.step_metrics.add(self.global_step, global_loss, hits, scored)
        own = own_losses(self.own_loss_parts)  # the parts' losses of their own (DSA's indexers): added, logged beside
        if logs_now(self.global_step, log_every_n_steps(self.trainer)):
            self.flush_step_metrics()
            if own:
                self.log("train/own_loss", torch.stack([part.detach() for part in own]).sum())  # what is added
        return {"loss": loss + sum(own) if own else loss, "global_loss": global_loss}

    def on_train_epoch_start(self) -> None:
        self.step_metrics.new_epoch()  # a resumed epoch starts here

    def on_train_epoch_end(self) -> None:
        self.flush_step_metrics()  # the epoch's last steps join its sums, read on the host
        sums = self.step_metrics.epoch  # loss sum, steps, hits, scored tokens
        if self.trainer.world_size > 1:  # every process's tokens: one all-reduce and one read for the epoch
            totals = torch.tensor(sums, dtype=torch.float64, device=self.device)
            sums = self.trainer.strategy.reduce(totals, reduce_op="sum").tolist()
        loss_sum, steps, correct, scored = sums  # (the loss sums: a ratio of sums, as every process)
        if steps:
            self.log("train/loss_epoch", loss_sum / steps, prog_bar=True)
            self.log("train/acc_epoch", correct / max(scored, 1.0))

    def _finite_everywhere(self, loss: Tensor) -> bool:
        return self.trainer.strategy.reduce_boolean_decision(bool(torch.isfinite(loss)), all=True)

    def flush_step_metrics(self) -> list[StepRow]:
        """Read the steps' numbers since the last read (one transfer), stop on a non-finite loss among them
        (model.nonfinite=stop), and log the newest step's to the loggers. Called on logging steps, before
        every checkpoint and at the epoch's end (andrea.train.lit: LastCheckpoint, RunStats)."""
        rows = self.step_metrics.flush()
        bad = next((row for row in rows if not row.finite), None)
        if bad is not None:
            where = self.finite_watch.describe()
            raise NonFiniteLossError(
                f"train/loss is {bad.loss} at step {bad.step}{f' ({where})' if where else ''}; training stopped "
                "with the last checkpoint kept; "
                "lower model.optimizer.lr, or set model.nonfinite=skip to skip such batches"
            )
        if rows and self.trainer.is_global_zero:  # straight to the loggers: no per-step work in Lightning
            metrics = {"train/loss_step": rows[-1].loss, "train/acc_step": rows[-1].acc}
            if self.nonfinite == "skip":
                metrics["train/skipped_steps"] = float(self.skipped_steps)
            for logger in self.trainer.loggers:
                logger.log_metrics(metrics, step=rows[-1].step)
        return rows

    def setup(self, stage: str) -> None:
        """One set of metrics per validation set the data module names (before Lightning moves the module)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        for name in set_names(datamodule):
            if name not in self.val_metrics:
                self.val_metrics[name] = SetMetrics(network(self.net).vocab_size)

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        outputs = self._loss(batch)
        name = set_names(getattr(self.trainer, "datamodule", None))[dataloader_idx]
        metrics: SetMetrics = self.val_metrics[name]  # type: ignore[assignment]  # a ModuleDict of SetMetrics
        metrics.update(*outputs)
        metrics.log_to(self, name)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.net_config is not None:
            checkpoint[CHECKPOINT_CONFIG_KEY] = self.net_config  # plain containers only: weights_only loads
            checkpoint[CHECKPOINT_FORMAT_KEY] = FORMAT  # the math the config means (andrea.models.files.formats)
        if self.tokenizer is not None:
            checkpoint[CHECKPOINT_TOKENIZER_KEY] = self.tokenizer
        checkpoint["andrea_skipped_steps"] = self.skipped_steps
        task = task_record(getattr(self._trainer, "datamodule", None)) if self._trainer is not None else None
        if task is not None:  # plain values: andrea-eval maps the name onto our own class
            checkpoint[CHECKPOINT_TASK_KEY] = task

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.skipped_steps = checkpoint.get("andrea_skipped_steps", 0)

    def configure_optimizers(self) -> OptimizerLRScheduler:
        # By the names of the matrices, taken before any wrapping: FSDP flattens every parameter to 1-D.
        named = [(n.replace("_fsdp_wrapped_module.", ""), p) for n, p in self.named_parameters() if p.requires_grad]
        decay = [p for n, p in named if n in self._matrices]
        no_decay = [p for n, p in named if n not in self._matrices]
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]  # decay: the optimizer's own
        optimizer = self.optimizer_factory(params=groups)
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
