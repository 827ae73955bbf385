"""What makes a killed run lose nothing: atomic checkpoint files, mid-epoch data resume,
and a checkpoint on SIGTERM / SIGINT before a clean exit.

    AtomicCheckpointIO  every checkpoint is written beside its final name and renamed into
                        place: a kill during the write leaves the previous file whole
    LastCheckpoint      last.ckpt every N optimisation steps, after every validation and at the end
    ResumeData          counts the batches trained in the epoch, which the data module saves
                        in every checkpoint: a resumed run skips them (andrea.data.sampler)
    StopOnSignal        SIGTERM or SIGINT: finish the current step, save last.ckpt, stop
    time_limit_ignored  the time limit's warning ignored once a run has trained to its end
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.types import STEP_OUTPUT

from andrea.data.sampler import EpochSampler
from andrea.train.lit.lightning_internals import batch_processed, save_last, stop_now
from andrea.train.run_dir import LAST, disk_error
from andrea.train.slurm import TIME_LIMIT_SIGNAL
from andrea.utils.files import atomic_write

# SIGUSR2: submitit's (hydra/launcher=slurm) warning ahead of a job's time limit
SIGNALS = tuple(s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGUSR2", None)) if s is not None)


def epoch_ends(trainer: L.Trainer) -> bool:
    """Whether the batch just trained is the epoch's last (limit_train_batches included)."""
    processed, is_last_batch = batch_processed(trainer)
    return is_last_batch or processed >= trainer.num_training_batches


def steps_optimizer(trainer: L.Trainer, batch_idx: int) -> bool:
    """Whether the batch just trained ended with an optimizer step (gradient accumulation)."""
    return (batch_idx + 1) % trainer.accumulate_grad_batches == 0 or epoch_ends(trainer)


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None) -> None:
        path = Path(path)
        try:
            with atomic_write(path) as partial, open(partial, "wb") as f:
                torch.save(checkpoint, f)
        except OSError as err:  # disk full, read-only: the previous file stays whole, no partial left
            raise disk_error(err, "writing a checkpoint", path) from None
        except RuntimeError as err:  # torch.save reports a write that stopped part-way as a RuntimeError
            reason = f"{os.strerror(errno.ENOSPC)}? the write stopped part-way ({str(err).splitlines()[0]})"
            raise disk_error(OSError(errno.ENOSPC, reason), "writing a checkpoint", path) from None


class LastCheckpoint(ModelCheckpoint):
    """last.ckpt, always under that name: every `every_n_train_steps` optimisation steps, after the
    last batch of every epoch and when training ends (a plain ModelCheckpoint with a step interval
    saves at neither, leaving the file up to N - 1 steps behind). Saves are taken at the end of a
    batch, where Lightning resumes most exactly (its logging step included); the epoch-end one
    therefore comes before that epoch's validation, which a run resumed from it does not repeat."""

    dirpath: str | Path  # ModelCheckpoint's may be None; this one is always given

    def __init__(self, dirpath: str, every_n_train_steps: int = 50) -> None:
        super().__init__(
            dirpath=dirpath, every_n_train_steps=every_n_train_steps, save_top_k=0, save_last=True,
            enable_version_counter=False,
        )  # fmt: skip

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if epoch_ends(trainer) or 0 < trainer.max_steps <= trainer.global_step:
            self.save_now(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save_now(trainer)  # a run stopped by max_time or early stopping

    def save_now(self, trainer: L.Trainer) -> None:
        """Write last.ckpt now, unless it already holds this step; the steps' numbers are read first, so a
        non-finite loss among them stops the run before its weights are saved (model.nonfinite=stop)."""
        flush = getattr(trainer.lightning_module, "flush_step_metrics", None)
        if flush is not None:
            flush()
        save_last(self, trainer)


class CheckpointRestoreError(ValueError):
    """A checkpoint whose training state (loops, optimizer, schedulers) Lightning could not restore."""


# What Lightning raises when a checkpoint's state has the right top-level type but the wrong inside
RESTORE_ERRORS = (AttributeError, KeyError, TypeError, ValueError, IndexError)


class RestoreWatch(L.Callback):
    """Where a resumed run stands: whether Lightning is restoring a checkpoint's training state right now
    (so that a failure there is said as the checkpoint's, in one line), and the step training resumed at."""

    def __init__(self, checkpoint: str | Path | None = None) -> None:
        self.checkpoint = checkpoint  # the ckpt_path this run resumes from
        self.restoring = False
        self.start_step: int | None = None  # the global step training started from, once known

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.restoring = True  # Lightning restores modules and callbacks, then optimizers, schedulers and loops

    def on_sanity_check_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restored(trainer)  # the first hook after the whole training state is back

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restored(trainer)

    def _restored(self, trainer: L.Trainer) -> None:
        restored, self.restoring = self.restoring, False
        if restored and self.checkpoint is not None:  # once the whole training state is back
            _check_optimizer_shapes(trainer, self.checkpoint)
        if self.start_step is None:
            self.start_step = trainer.global_step

    def trained_steps(self, trainer: L.Trainer) -> int:
        return trainer.global_step - (self.start_step or 0)

    def failure(self, err: Exception) -> CheckpointRestoreError | None:
        """`err` as the checkpoint's one-line refusal, when it came while its state was being restored."""
        if not self.restoring or not isinstance(err, RESTORE_ERRORS):
            return None
        detail = " ".join(str(err).split())[:200] or type(err).__name__
        return CheckpointRestoreError(
            f"ckpt_path={self.checkpoint}: its training state cannot be restored ({type(err).__name__}: {detail}); "
            "give a checkpoint written by andrea-train, e.g. an earlier one in the same folder"
        )


def _check_optimizer_shapes(trainer: L.Trainer, checkpoint: str | Path) -> None:
    """Each restored optimizer state tensor (AdamW's exp_avg, exp_avg_sq) as large as its own parameter: torch's
    Optimizer.load_state_dict pairs them by position and checks nothing, so a crafted or mismatched checkpoint
    would otherwise fail at the first step, or broadcast silently."""
    names = {id(p): name for name, p in trainer.lightning_module.named_parameters()}
    for i, optimizer in enumerate(trainer.optimizers):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for k, param in enumerate(params):
            for field, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor) and value.dim() and value.shape != param.shape:
                    raise CheckpointRestoreError(
                        f"ckpt_path={checkpoint}: optimizer_states[{i}].state[{k}].{field} has shape "
                        f"{tuple(value.shape)}, its weight {names.get(id(param), '?')} {tuple(param.shape)}; give a "
                        "checkpoint written by andrea-train for this model"
                    )


class ResumeData(L.Callback):
    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        sampler = getattr(trainer.train_dataloader, "sampler", None)
        if not isinstance(sampler, EpochSampler):
            return
        sampler.trained_batches += 1  # before any checkpoint of this step is written
        if epoch_ends(trainer):  # a checkpoint from now on resumes at the next epoch's start
            sampler.epoch, sampler.trained_batches = sampler.epoch + 1, 0


class StopOnSignal(L.Callback):
    """On SIGTERM, SIGINT or SIGUSR2, stop after the current optimisation step with last.ckpt saved.

    The handlers replace Lightning's (and submitit's) for the duration of training
    (Lightning puts the previous ones back at teardown). Under DDP every process
    stops at the same step: the decision is reduced over the processes after each
    step that ended with an optimizer step. A second signal does not wait: SIGINT
    raises KeyboardInterrupt, the others exit at once with 128 + n.
    """

    def __init__(self, dirpath: str | Path) -> None:
        self.dirpath = Path(dirpath)
        self.received: int | None = None  # the signal number, once one came
        self.own = False  # whether it came to this process (else another process of the run got one)

    @property
    def checkpoint(self) -> Path:
        return self.dirpath / LAST

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for signum in SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.own:  # asked twice: stop now
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        self.received, self.own = signum, True  # its own signal names the stop, if another process's came first

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        if not steps_optimizer(trainer, batch_idx):
            return  # mid gradient accumulation: the step is not finished
        if not trainer.strategy.reduce_boolean_decision(self.received is not None, all=False):
            return
        self.received = self.received or signal.SIGTERM  # another process got it
        last = next((c for c in trainer.checkpoint_callbacks if isinstance(c, LastCheckpoint)), None)
        if last is not None and Path(last.dirpath) == self.dirpath:
            last.save_now(trainer)  # through the callback, so it does not save the same step again
        else:
            trainer.save_checkpoint(self.checkpoint)
        stop_now(trainer)
        # Lightning validates once more when should_stop is set (for early stopping), and a
        # ModelCheckpoint may then save a "best": a signal asks to stop, not to evaluate.
        trainer.limit_val_batches = 0
        trainer.should_stop = True


@contextlib.contextmanager
def time_limit_ignored() -> Iterator[None]:
    """The time limit's warning (SLURM's, `signal_delay_s` ahead of a job's end) ignored while a run that trained
    to its end validates and writes its result: nothing is left to save, and a finished job is never requeued."""
    if TIME_LIMIT_SIGNAL is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(TIME_LIMIT_SIGNAL, too_late)
    try:
        yield
    finally:  # None: a handler installed outside Python, which Python cannot put back
        signal.signal(TIME_LIMIT_SIGNAL, signal.SIG_DFL if previous is None else previous)


def too_late(signum: int, frame: FrameType | None) -> None:
    print(f"signal {signum} (the time limit's warning) came after training ended: nothing to save", file=sys.stderr)
