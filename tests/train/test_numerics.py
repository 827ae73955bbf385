"""A non-finite training loss: stop with the last good checkpoint kept, or skip and count."""

import math

import pytest
import torch

from andrea.mixers.gla import GLA
from andrea.train.lit.module import LanguageModelModule, NonFiniteLossError
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train

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
    with pytest.raises(
        NonFiniteLossError,
        match=r"train/loss is nan at step 5; training stopped with the last checkpoint kept.*last\.ckpt",
    ):
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
    assert result.val_loss is not None
    assert math.isfinite(result.val_loss) and result.global_step == steps


def test_resume_from_an_epoch_end_continues_with_the_next_epoch(tmp_path):
    """With limit_train_batches the epoch ends before the sampler does; the resumed run must
    still start the next epoch's order, as the unbroken run does (in-process, logger=csv)."""
    import csv

    common = [*QUICK, "data.num_train=1024", "+trainer.limit_train_batches=4", "logger=csv", "seed=5"]

    def steps(run_dir, version):
        with open(run_dir / "csv" / f"version_{version}" / "metrics.csv") as f:
            return {int(r["step"]): r["train/loss_step"] for r in csv.DictReader(f) if r.get("train/loss_step")}

    train(compose_train(tmp_path / "unbroken", [*common, "trainer.max_epochs=2"]))
    train(compose_train(tmp_path / "split", [*common, "trainer.max_epochs=1"]))
    last = tmp_path / "split" / "checkpoints" / "last.ckpt"
    train(compose_train(tmp_path / "split", [*common, "trainer.max_epochs=2", f"ckpt_path={last}"]))
    unbroken, resumed = steps(tmp_path / "unbroken", 0), steps(tmp_path / "split", 1)
    assert sorted(resumed) == [4, 5, 6, 7] and resumed == {s: unbroken[s] for s in resumed}


def test_a_non_finite_loss_names_the_layer_where_it_began(tmp_path, monkeypatch):
    """From step 5 the GLA layer (layer 1 of three) gives an infinity: the loss says which layer and when."""
    real, steps = GLA.forward, list[int]()

    def overflowing(self, x, *args, **kwargs):
        y, weights = real(self, x, *args, **kwargs)
        if self.training:  # one training forward a step
            steps.append(len(steps))
            y = y * math.inf if steps[-1] >= BAD_FROM_STEP else y
        return y, weights

    monkeypatch.setattr(GLA, "forward", overflowing)
    layout = ["model.net.n_layer=3", "model.net.layout=[attention,gla,attention]", "mixer=gla"]
    began = r"at step 5 \(layer 1 \(gla\) gave the first non-finite output, at step 5\); training stopped"
    with pytest.raises(NonFiniteLossError, match=began):
        train(compose_train(tmp_path, [*QUICK, "data.num_train=1024", *layout]))
