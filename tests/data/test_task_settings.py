"""A task's settings are typed by its constructors (andrea.utils.typed_settings) and checked whenever a task is
built: by the config's validation, before the run dir is written and before trainer.fit; evaluation sets
as the tasks they make; the rows a task would make against the machine's memory."""

from __future__ import annotations

import pytest
import torch

from andrea.data.mqar import MQARDataModule
from andrea.train.config import ConfigError, validate
from tests.compose import compose_train

# (a task, the bad setting, the one line it is refused with): the hostile cases, kept and rerun every round
HOSTILE = [
    ("experiment=mqar", "data.num_kv_pairs=true", "data.num_kv_pairs=True must be an integer >= 0"),
    ("experiment=mqar", "data.power_a=abc", "data.power_a='abc' must be a finite number"),
    ("experiment=mqar", "data.seed=abc", "data.seed='abc' must be an integer >= 0"),
    ("experiment=noisy_recall", "data.noise_vocab_size=-1", "data.noise_vocab_size=-1 must be an integer >= 0"),
    ("experiment=noisy_recall", "data.noise_vocab_size=1.5", "data.noise_vocab_size=1.5 must be an integer >= 0"),
    ("experiment=fuzzy_recall", "data.k_motif_size=1.5", "data.k_motif_size=1.5 must be an integer >= 0"),
    ("experiment=memorization", "data.kv_map_seed=abc", "data.kv_map_seed='abc' must be an integer >= 0"),
    ("experiment=fuzzy_recall", "data.vocab_size=2000", "data.vocab_size=2000: the task's rows need about "),
    ("experiment=modular_addition", "data.p=100000", "data.p=100000: the task's rows need about "),
    ("data=mqar", "data.eval_sets={long: {seq_len: 7}}", "data.eval_sets.long: data.num_kv_pairs=4, data.seq_len=7"),
    ("data=mqar", "data.eval_sets={long: {sq_len: 7}}", "data.eval_sets.long.sq_len is not a setting of task mqar"),
    ("data=mqar", "data.eval_sets={long: {seed: abc}}", "data.eval_sets.long: data.seed='abc' must be an integer >= 0"),
]


@pytest.mark.parametrize("task, setting, message", HOSTILE, ids=[h[1] for h in HOSTILE])
def test_a_bad_task_setting_is_refused_by_the_validation_in_one_line(task, setting, message, tmp_path):
    cfg = compose_train(tmp_path, [task, setting, "logger=none"])
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value), str(refused.value)
    assert not (tmp_path / "logs").exists() and not any(tmp_path.rglob("*.ckpt"))  # nothing written


def test_every_setting_of_every_task_is_typed():
    """No task setting goes unchecked: each has a rule (its annotation's or DATA's)."""
    from andrea.data.catalog import TASKS, task_class
    from andrea.utils.typed_settings import setting_names

    for name in TASKS:
        cls = task_class(name)
        untyped = set(setting_names(cls)) - set(cls.setting_rules()) - {"eval_sets", "train_mix"}  # built as tasks
        assert not untyped, (name, untyped)


def test_a_task_s_valid_settings_still_build_and_say_their_footprint():
    task = MQARDataModule(num_kv_pairs=8, seq_len=64, vocab_size=512, eval_sets={"long": {"seq_len": 128}})
    need, setting = task.footprint()
    assert need == 2 * 16 * ((4096 + 512) * 64 + 512 * 128) and setting == "data.num_train=4096"


def test_an_evaluation_set_s_batch_size_sets_its_loader_s_and_mqar_runs_past_its_vocabulary():
    """A long evaluation set in batches of its own (data.eval_sets.<name>.batch_size), the others in the task's;
    MQAR's rows at 4,096 tokens of a vocabulary of 64 (Zoology's vocab_size > seq_len asks more than its draws need):
    every key queried once, its value the label."""
    data = MQARDataModule(seq_len=128, num_kv_pairs=8, vocab_size=64, num_train=8, num_val=6, batch_size=4,
                          eval_sets={"long": {"seq_len": 4096, "num_val": 6, "batch_size": 2}})  # fmt: skip
    data.setup()
    val, long = data.val_dataloader()
    assert [len(b["input_ids"]) for b in val] == [4, 2] and [len(b["input_ids"]) for b in long] == [2, 2, 2]
    ids, labels = data.extra_val["long"].input_ids, data.extra_val["long"].labels
    assert ids.shape == (6, 4096) and int((labels != -100).sum(-1).min()) == 8
    queried = labels != -100
    assert torch.equal(ids[queried].view(6, 8).sort(-1).values, ids[:, 0:16:2].sort(-1).values)
    assert torch.equal(labels[queried].view(6, 8).sort(-1).values, ids[:, 1:16:2].sort(-1).values)
