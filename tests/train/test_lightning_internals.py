"""The private Lightning API andrea uses (andrea/train/lit/lightning_internals.py) is still there: an
upgrade that moves any of it fails here, by name, not somewhere inside a resumed run."""

import inspect

import lightning
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loops import _FitLoop, _TrainingEpochLoop

from andrea.train.lit import lightning_internals


def test_the_version_they_were_checked_with_is_the_one_installed():
    assert lightning.__version__ == lightning_internals.CHECKED_WITH, (
        f"lightning {lightning.__version__} is installed, andrea's internals were checked with "
        f"{lightning_internals.CHECKED_WITH}: re-check andrea/train/lit/lightning_internals.py, "
        "then update CHECKED_WITH"
    )


def test_every_private_name_still_exists():
    for name in ("_should_skip_saving_checkpoint", "_save_last_checkpoint", "_monitor_candidates"):
        assert callable(getattr(ModelCheckpoint, name, None)), f"ModelCheckpoint.{name} is gone"
    assert list(inspect.signature(ModelCheckpoint._save_last_checkpoint).parameters) == [
        "self",
        "trainer",
        "monitor_candidates",
    ]
    fit_loop = inspect.signature(_FitLoop.__init__).parameters
    assert "min_epochs" in fit_loop, "_FitLoop no longer takes min_epochs"
    assert "min_steps" in inspect.signature(_TrainingEpochLoop.__init__).parameters
    progress = _TrainingEpochLoop.__init__.__code__.co_names
    assert "batch_progress" in progress or hasattr(_TrainingEpochLoop, "batch_progress")


def test_the_trainer_still_keeps_its_logging_interval():
    trainer = lightning.Trainer(
        log_every_n_steps=7, logger=False, enable_checkpointing=False, enable_progress_bar=False
    )
    assert lightning_internals.log_every_n_steps(trainer) == 7
