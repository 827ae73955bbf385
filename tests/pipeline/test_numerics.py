"""A non-finite training loss: stop with the last good checkpoint kept, or skip and count."""

import math

import pytest
import torch

from andrea.lit.module import LanguageModelModule, NonFiniteLossError
from andrea.pipeline import train

from .conftest import QUICK, compose_train

BAD_FROM_STEP = 5  # batches from this training step on give an infinite / NaN loss


@pytest.fixture
def poisoned(monkeypatch):
    real = LanguageModelModule._loss

    def loss(self, batch):
        value, logits, labels = real(self, batch)
        if self.training and self.global_step >= BAD_FROM_STEP and self.global_step % 2 == 1:
            value = value * math.nan
        return value, logits, labels

    monkeypatch.setattr(LanguageModelModule, "_loss", loss)


def test_stop_keeps_the_last_good_checkpoint(tmp_path, poisoned):
    cfg = compose_train(tmp_path, [*QUICK, "data.num_train=1024", "callbacks.last_checkpoint.every_n_train_steps=2"])
    with pytest.raises(NonFiniteLossError, match=r"train/loss is nan at step 5; training stopped with the last checkpoint kept.*last\.ckpt"):
        train(cfg)
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 4  # the checkpoint of step 4, written before the bad batch
    assert all(torch.isfinite(t).all() for t in state["state_dict"].values())


def test_skip_counts_and_trains_on(tmp_path, poisoned):
    cfg = compose_train(tmp_path, [*QUICK, "data.num_train=1024", "model.nonfinite=skip"])
    result = train(cfg)
    steps = 1024 // 64  # one epoch of 16 batches
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["andrea_skipped_steps"] == len([s for s in range(BAD_FROM_STEP, steps) if s % 2]) == 6
    assert all(torch.isfinite(t).all() for t in state["state_dict"].values())  # no bad batch reached the weights
    assert math.isfinite(result["val_loss"]) and result["global_step"] == steps
