"""The step's numbers kept on the device and read together: each row's loss and accuracy, and the epoch's
loss (mean over its steps) and accuracy (over every scored token), equal to a reference computed apart."""

from __future__ import annotations

import math

import lightning as L
import pytest
import torch
from torchmetrics.classification import MulticlassAccuracy

from andrea.data.tasks import IGNORE_INDEX
from andrea.train import pipeline
from andrea.train.lit.module import next_token_loss
from andrea.train.lit.step_metrics import StepMetrics
from tests.compose import QUICK, compose_train


def test_a_flush_reads_every_pending_row_and_adds_it_to_the_epoch():
    metrics = StepMetrics()
    metrics.add(0, torch.tensor(2.0, dtype=torch.bfloat16), torch.tensor(3), torch.tensor(4))
    metrics.add(1, torch.tensor(float("nan")), torch.tensor(0), torch.tensor(0))  # nothing scored: acc 0
    rows = metrics.flush()
    assert [(r.step, r.loss, r.acc, r.finite) for r in rows[:1]] == [(0, 2.0, 0.75, True)]
    assert (rows[1].step, rows[1].acc, rows[1].finite) == (1, 0.0, False) and math.isnan(rows[1].loss)
    assert metrics.flush() == [] and metrics.last is rows[1] and metrics.take() == rows and metrics.take() == []
    assert metrics.epoch[1:] == [2.0, 3.0, 4.0]  # steps, hits, scored
    metrics.add(2, torch.tensor(1.0), torch.tensor(16_000_001), torch.tensor(16_000_003))  # counts past float32's 2**24
    metrics.flush()
    assert metrics.epoch[2:] == [16_000_004.0, 16_000_007.0]
    metrics.new_epoch()
    assert metrics.epoch == [0.0] * 4


class Reference(L.Callback):
    """Each step's loss and hits from the module's own forward before its update, by torchmetrics' accuracy."""

    def __init__(self, vocab_size: int) -> None:
        self.losses: list[float] = []
        self.accuracy = MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE_INDEX)

    @torch.no_grad()
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        logits = pl_module(batch["input_ids"])
        self.losses.append(float(next_token_loss(logits, batch["labels"])))
        self.accuracy.update(logits.flatten(0, 1), batch["labels"].flatten())

    def on_train_end(self, trainer, pl_module):
        self.logged = {key: float(value) for key, value in trainer.callback_metrics.items()}


@pytest.mark.parametrize("every", [1, 3])  # each step read alone, or the epoch's last rows read at its end
def test_the_epoch_loss_and_accuracy_equal_a_reference(monkeypatch, tmp_path, every):
    cfg = compose_train(tmp_path, [*QUICK, f"trainer.log_every_n_steps={every}", "validate=false"])
    reference = Reference(cfg.data.vocab_size)
    instantiate = pipeline.instantiate

    def with_reference(node, *args, **kwargs):
        if "callbacks" in kwargs and "Trainer" in str(node.get("_target_", "")):
            kwargs["callbacks"] = [*kwargs["callbacks"], reference]
        return instantiate(node, *args, **kwargs)

    monkeypatch.setattr(pipeline, "instantiate", with_reference)
    pipeline.train(cfg)
    assert len(reference.losses) == 4  # one epoch of 4 steps
    assert reference.logged["train/loss_epoch"] == pytest.approx(sum(reference.losses) / 4, rel=1e-5)
    assert reference.logged["train/acc_epoch"] == pytest.approx(float(reference.accuracy.compute()), rel=1e-6)
