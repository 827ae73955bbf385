"""Every architecture task trains with attention through its experiment preset and prints its accuracy; a task
with evaluation sets logs and prints each under its own name."""

import math
import subprocess
from pathlib import Path

import pytest
import torch
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from tests.compose import compose_train

TASKS = ("mqar", "recall", "noisy_recall", "fuzzy_recall", "selective_copy", "memorization", "flip_flop")
SHORT = ["trainer.max_steps=4", "trainer.limit_val_batches=2", "logger=none", "callbacks.attention_maps=null"]
DEFAULT_RUN = ("mqar", "flip_flop", "recall")  # evaluation sets, and training labels apart from the scored ones


@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t in DEFAULT_RUN else [pytest.mark.slow]) for t in TASKS])
def test_each_task_trains_with_attention_and_prints_its_accuracy(task, tmp_path, capsys):
    rows = [] if task == "memorization" else ["data.num_train=256", "data.num_val=64"]
    result = train(compose_train(tmp_path, [f"experiment={task}", *rows, *SHORT]))
    HydraConfig.instance().cfg = None
    printed = capsys.readouterr().out
    assert result.status == "completed" and result.val_acc is not None and 0 <= result.val_acc <= 1
    assert f"val acc {result.val_acc:.4f}" in printed
    assert result.val_acc_macro is not None and math.isfinite(result.val_acc_macro)
    assert result.tokens_per_cpu_s is not None and result.tokens_per_cpu_s > 0
    assert result.load_max is not None and result.load_max["cores"] >= 1
    named = {"mqar": ["2x", "4x"], "flip_flop": ["sparse", "dense"]}.get(task)
    assert (list(result.eval_sets) if result.eval_sets else None) == named
    if named and result.eval_sets:
        assert f"evaluation sets: {named[0]} loss " in printed
        assert all(0 <= scores["acc"] <= 1 and "acc_macro" in scores for scores in result.eval_sets.values())


def test_mad_s_copying_trains_from_its_data_group(tmp_path):
    """data=copying has no preset: the group with CPU-sized rows, as experiment=selective_copy sizes its task."""
    rows = ["data.seq_len=64", "data.num_tokens_to_copy=8", "data.num_train=256", "data.num_val=64"]
    result = train(compose_train(tmp_path, ["data=copying", *rows, *SHORT]))
    HydraConfig.instance().cfg = None
    assert result.status == "completed" and result.val_acc is not None and 0 <= result.val_acc <= 1


def test_a_result_records_what_it_ran_on(tmp_path):
    """The commit andrea is checked out at (this repository's HEAD), the versions, threads and seed."""
    root = Path(__file__).parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    result = train(compose_train(tmp_path, ["experiment=flip_flop", "data.num_train=128", "seed=7", *SHORT]))
    HydraConfig.instance().cfg = None
    record = result.environment
    assert record is not None and record["commit"].split("+")[0] == head.stdout.strip()
    assert (record["torch"], record["threads"], record["seed"]) == (torch.__version__, torch.get_num_threads(), 7)
    assert record["cpu"] and record["fla"] == "0.6.0"


@pytest.mark.slow  # reason: 200 full-batch steps of a 1-layer model, about 20 s
def test_modular_addition_trains_on_half_of_the_pairs_and_is_scored_on_the_rest(tmp_path):
    result = train(compose_train(tmp_path, ["experiment=modular_addition", "trainer.max_epochs=20", *SHORT[2:]]))
    HydraConfig.instance().cfg = None
    assert result.status == "completed" and result.train_acc is not None and result.val_acc is not None


def test_an_evaluation_set_longer_than_the_model_is_refused_before_anything_is_built(tmp_path):
    from andrea.train.config import ConfigError, validate

    long_set = ["data.eval_sets={long: {seq_len: 128}}", "model.net.max_context=64"]  # a context set by hand
    cfg = compose_train(tmp_path, ["data=mqar", "data.vocab_size=512", *long_set])  # (a preset's grows to 128)
    with pytest.raises(ConfigError, match=r"^data\.eval_sets\.long\.seq_len=128 exceeds model\.net\.max_context=64;"):
        validate(cfg)
