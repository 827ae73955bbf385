"""A training step never makes the host wait for the device, except on logging steps, and there once.

On a GPU every `.item()`, `float(t)`, `bool(t)`, `.tolist()` or `.cpu()` of a computed tensor waits for the
device. On CPU nothing waits, but the same reads happen: these tests count them, per training step, at the
op level (a TorchDispatchMode sees `aten::_local_scalar_dense`, which every scalar read lowers to) and at the
tensor methods that copy to the host. The optimizer's step counters are exempt: torch keeps them on the CPU
beside CUDA weights (its AdamW reads them there, no device involved). So are the steps the attention maps
record (their own, documented cost) and the last step (the end of training: checkpoints, the summary).
"""

from __future__ import annotations

import traceback
from collections import Counter

import lightning as L
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from andrea.train import pipeline
from tests.compose import compose_train

SCALAR_READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default}
EVERY = 5  # trainer.log_every_n_steps
STEPS = 21  # logging steps 4, 9, 14, 19; the maps record at step 0
RUN = ["trainer.max_steps=21", f"trainer.log_every_n_steps={EVERY}", "validate=false"]  # inside the first epoch
MODELS = {"toy": [], "gpt": ["data=text", "model=andrea-tiny", "data.seq_len=32", "data.batch_size=8"]}


def _from_the_optimizer() -> bool:
    """Whether torch's optimizer code itself makes this read (the training step runs inside
    `optimizer.step(closure)` too: what counts is the nearest caller outside torch)."""
    for frame in reversed(traceback.extract_stack()[:-2]):  # innermost first, this helper and its caller left out
        if "/torch/optim/" in frame.filename:
            return True
        if "/torch/" not in frame.filename and frame.filename != __file__:
            return False
    return False


class HostReads(TorchDispatchMode):
    """Counts the reads to the host made while a training step of `steps.current` runs."""

    def __init__(self, steps: StepClock) -> None:
        super().__init__()
        self.steps = steps

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SCALAR_READS and self.steps.current is not None and not _from_the_optimizer():
            self.steps.reads[self.steps.current] += 1
        return func(*args, **(kwargs or {}))


class StepClock(L.Callback):
    """Which training step runs now (None outside them), and the reads counted in each."""

    def __init__(self) -> None:
        self.current: int | None = None
        self.reads: Counter[int] = Counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.current = trainer.global_step

    def on_validation_start(self, trainer, pl_module):
        self.current = None

    def on_train_end(self, trainer, pl_module):
        self.current = None


def count_reads(monkeypatch, run_dir, overrides) -> Counter[int]:
    clock = StepClock()
    instantiate = pipeline.instantiate

    def with_clock(node, *args, **kwargs):  # the Trainer, with the clock among its callbacks
        if "callbacks" in kwargs and "Trainer" in str(node.get("_target_", "")):
            kwargs["callbacks"] = [*kwargs["callbacks"], clock]
        return instantiate(node, *args, **kwargs)

    monkeypatch.setattr(pipeline, "instantiate", with_clock)
    for method in ("tolist", "cpu", "numpy", "item"):  # the tensor methods that copy to the host
        original = getattr(torch.Tensor, method)

        def counted(tensor, *args, _original=original, **kwargs):
            if clock.current is not None and not _from_the_optimizer():
                clock.reads[clock.current] += 1
            return _original(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, method, counted)
    with HostReads(clock):
        pipeline.train(compose_train(run_dir, [*RUN, *overrides]))
    return clock.reads


def assert_one_read_per_logging_step(reads: Counter[int]) -> None:
    middle = range(1, STEPS - 1)  # not the maps' record at step 0, not the end of training
    logging = [s for s in middle if (s + 1) % EVERY == 0]
    assert {s: reads[s] for s in middle if s not in logging} == {s: 0 for s in middle if s not in logging}
    assert all(reads[s] <= 1 for s in logging), {s: reads[s] for s in logging}
    assert sum(reads[s] for s in logging) >= 1  # the logged numbers are read somewhere: the counter works


@pytest.mark.parametrize("logger", ["many_loggers"])
@pytest.mark.parametrize("model", ["toy"])
def test_no_step_waits_for_the_device_but_a_logging_step_once(monkeypatch, tmp_path, model, logger):
    assert_one_read_per_logging_step(count_reads(monkeypatch, tmp_path, [*MODELS[model], f"logger={logger}"]))


@pytest.mark.slow(reason="a short training run for each model and logger, ~30 s")
@pytest.mark.parametrize("logger", ["csv", "tensorboard", "wandb", "none"])
@pytest.mark.parametrize("model", ["toy", "gpt"])
def test_no_step_waits_for_the_device_with_any_logger(monkeypatch, tmp_path, model, logger):
    assert_one_read_per_logging_step(count_reads(monkeypatch, tmp_path, [*MODELS[model], f"logger={logger}"]))


def test_the_counter_sees_a_step_that_reads(monkeypatch, tmp_path):
    """The same count, with model.nonfinite=skip: that setting reads the loss every step (documented)."""
    reads = count_reads(monkeypatch, tmp_path, ["logger=csv", "model.nonfinite=skip"])
    assert all(reads[s] >= 1 for s in range(1, STEPS - 1))
