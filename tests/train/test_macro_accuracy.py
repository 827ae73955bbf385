"""Macro accuracy counted in O(V): equal to torchmetrics' MulticlassAccuracy(average="macro") wherever its (V, V)
confusion matrix fits, and a validation at GPT-2's 50,257 tokens that stays within a bounded peak memory."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchmetrics.classification import MulticlassAccuracy

from andrea.data.tasks import IGNORE_INDEX
from andrea.train.lit.macro_accuracy import MacroAccuracy
from andrea.train.lit.val_metrics import SetMetrics


@pytest.mark.parametrize("vocab_size", [2, 7, 64, 500])
def test_macro_accuracy_equals_torchmetrics(vocab_size):
    """Over several updates, with ignored positions, classes never labelled, and classes never predicted."""
    ours = MacroAccuracy(vocab_size, ignore_index=IGNORE_INDEX)
    reference = MulticlassAccuracy(vocab_size, average="macro", ignore_index=IGNORE_INDEX)
    generator = torch.Generator().manual_seed(vocab_size)
    for _ in range(3):
        logits = torch.randn(40, vocab_size, generator=generator)
        labels = torch.randint(0, max(vocab_size // 2, 1), (40,), generator=generator)  # half the classes unlabelled
        labels[torch.rand(40, generator=generator) < 0.2] = IGNORE_INDEX
        logits[:10, 0] += 10.0  # class 0 predicted more often than labelled
        ours.update(logits, labels)
        reference.update(logits, labels)
    assert ours.compute().item() == pytest.approx(reference.compute().item(), abs=1e-6)


def test_macro_accuracy_of_nothing_scored_is_zero_as_torchmetrics_says():
    ours = MacroAccuracy(5, ignore_index=IGNORE_INDEX)
    reference = MulticlassAccuracy(5, average="macro", ignore_index=IGNORE_INDEX)
    logits, labels = torch.randn(4, 5), torch.full((4,), IGNORE_INDEX)
    ours.update(logits, labels)
    reference.update(logits, labels)
    assert ours.compute().item() == reference.compute().item() == 0.0


def _kib(key: str) -> int:
    """A figure of this process's /proc status, in KiB (VmHWM: the peak resident memory; VmSize: the address space)."""
    found = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert found is not None, f"/proc/self/status has no {key}"
    return int(found.group(1))


def test_a_validation_at_gpt2s_vocabulary_adds_under_half_a_gigabyte_to_the_peak():
    """A validation step's metrics at GPT-2's 50,257 tokens: what they add to this process's peak resident memory
    (the logits themselves are 25 MB a batch). The address space is capped 2 GiB above its size meanwhile, so that
    a (V, V) count (20 GB) fails at once instead of taking this machine's memory."""
    metrics = SetMetrics(50_257)
    batches = [(torch.randn(4, 32, 50_257), torch.randint(0, 50_257, (4, 32))) for _ in range(2)]
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, ((_kib("VmSize") << 10) + (2 << 30), hard))
    try:
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from the current resident memory
        before = _kib("VmHWM")
        for logits, labels in batches:
            metrics.update(torch.tensor(10.0), logits, labels)
        score = float(metrics.acc_macro.compute())
        added = _kib("VmHWM") - before
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert 0.0 <= score <= 1.0
    assert added < 1 << 19, f"{added / 1024:.0f} MiB added"


@pytest.mark.slow  # reason: a whole text run in a process of its own, about 15 s
def test_a_three_step_text_run_with_gpt2s_tokens_peaks_under_two_gigabytes(tmp_path):
    """The issue's command as a user types it: validation included, GPT-2's 50,257 tokens."""
    train = str(Path(sys.executable).with_name("andrea-train"))
    overrides = ["data=text", "model=andrea-tiny", "data.seq_len=32", "trainer.max_steps=3", "logger=none"]
    script = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); " \
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script, train, *overrides, f"hydra.run.dir={tmp_path}/run"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "val acc" in done.stdout
    peak_kib = int(done.stdout.split()[-1])
    assert peak_kib < 2 << 20, f"peak {peak_kib / 1024:.0f} MiB"
