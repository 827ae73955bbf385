"""Every use andrea makes of Lightning's private or undocumented API, in one place.

Checked against lightning 2.6.6 (tests/train/test_lightning_internals.py fails loudly when an
upgrade moves any of them). Nothing else in andrea reaches past Lightning's public API.

    batch_processed(trainer)           batches of the epoch processed so far, and whether it was the last
    save_last(checkpoint, trainer)     ModelCheckpoint's own save_last path, unless this step is saved
    stop_now(trainer)                  let the fit loop stop before min_epochs / min_steps
    log_every_n_steps(trainer)         the Trainer's own setting (an attribute it sets, undeclared)
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

CHECKED_WITH = "2.6.6"


def batch_processed(trainer: L.Trainer) -> tuple[int, bool]:
    """(batches of this epoch processed so far, whether the last one was the epoch's last)."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    processed = progress.current.processed  # type: ignore[attr-defined]  # declared too wide: a _ProcessedTracker
    return processed, progress.is_last_batch


def save_last(checkpoint: ModelCheckpoint, trainer: L.Trainer) -> None:
    """Write `checkpoint`'s last checkpoint now (its `save_last` path), unless it already holds this step."""
    if not checkpoint._should_skip_saving_checkpoint(trainer):
        checkpoint._save_last_checkpoint(trainer, checkpoint._monitor_candidates(trainer))


def stop_now(trainer: L.Trainer) -> None:
    """Make `trainer.should_stop` end the fit at the next step boundary, min_epochs / min_steps or not."""
    trainer.fit_loop.min_epochs, trainer.fit_loop.epoch_loop.min_steps = 0, None


def log_every_n_steps(trainer: L.Trainer) -> int:
    """The Trainer's `log_every_n_steps` (its logger connector sets the attribute; the class does not declare it)."""
    return int(trainer.log_every_n_steps)  # type: ignore[attr-defined]
