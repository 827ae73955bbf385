"""What makes a killed run lose nothing: atomic checkpoint files, mid-epoch data resume,
and a checkpoint on SIGTERM / SIGINT before a clean exit.

    AtomicCheckpointIO  every checkpoint is written beside its final name and renamed into
                        place: a kill during the write leaves the previous file whole
    LastCheckpoint      last.ckpt every N optimisation steps, after every validation and at the end
    ResumeData          counts the batches trained in the epoch, which the data module saves
                        in every checkpoint: a resumed run skips them (andrea.data.sampler)
    StopOnSignal        SIGTERM or SIGINT: finish the current step, save last.ckpt, stop
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from andrea.data.sampler import EpochSampler

LAST = "last.ckpt"


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")  # same folder: the rename is atomic
        with open(partial, "wb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)


class LastCheckpoint(ModelCheckpoint):
    """last.ckpt, always under that name: every `every_n_train_steps` optimisation steps, after the
    last batch of every epoch and when training ends (a plain ModelCheckpoint with a step interval
    saves at neither, leaving the file up to N - 1 steps behind). Saves are taken at the end of a
    batch, where Lightning resumes most exactly (its logging step included)."""

    def __init__(self, dirpath: str, every_n_train_steps: int = 50):
        super().__init__(
            dirpath=dirpath, every_n_train_steps=every_n_train_steps, save_top_k=0, save_last=True,
            enable_version_counter=False,
        )  # fmt: skip

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        epoch_ends = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        if epoch_ends or 0 < trainer.max_steps <= trainer.global_step:
            self.save_now(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save_now(trainer)  # a run stopped by max_time or early stopping

    def save_now(self, trainer: L.Trainer) -> None:
        """Write last.ckpt now, unless it already holds this step."""
        if not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))


class ResumeData(L.Callback):
    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx) -> None:
        sampler = getattr(trainer.train_dataloader, "sampler", None)
        if isinstance(sampler, EpochSampler):  # before any checkpoint of this step is written
            sampler.trained_batches += 1


class StopOnSignal(L.Callback):
    """On SIGTERM or SIGINT, stop after the current optimisation step with last.ckpt saved.

    The handlers replace Lightning's for the duration of training (Lightning puts
    the previous ones back at teardown). Under DDP every process stops at the
    same step: the decision is reduced over the processes after each step.
    """

    def __init__(self, dirpath: str):
        self.dirpath = Path(dirpath)
        self.received: int | None = None  # the signal number, once one came

    @property
    def checkpoint(self) -> Path:
        return self.dirpath / LAST

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = signum

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.strategy.reduce_boolean_decision(self.received is not None, all=False):
            return
        self.received = self.received or signal.SIGTERM  # another process got it
        last = next((c for c in trainer.checkpoint_callbacks if isinstance(c, LastCheckpoint)), None)
        if last is not None and Path(last.dirpath) == self.dirpath:
            last.save_now(trainer)  # through the callback, so it does not save the same step again
        else:
            trainer.save_checkpoint(self.checkpoint)
        trainer.fit_loop.min_epochs, trainer.fit_loop.epoch_loop.min_steps = 0, None
        trainer.should_stop = True
