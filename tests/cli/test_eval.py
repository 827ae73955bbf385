"""andrea-eval: an MQAR model evaluated at twice its training length, its task read from the checkpoint as
plain values; the table printed and appended beside the checkpoint; bad changes refused in one line."""

import json
from pathlib import Path

import pytest
import torch
from hydra.core.hydra_config import HydraConfig

from andrea.cli.eval import main
from andrea.data.catalog import CHECKPOINT_TASK_KEY
from andrea.train.pipeline import train
from tests.compose import compose_train

MQAR = [
    "experiment=mqar", "data.vocab_size=512", "data.num_train=256", "data.num_val=64", "trainer.max_steps=8",
    "logger=none", "callbacks.attention_maps=null",
]  # fmt: skip


@pytest.fixture(scope="module")
def mqar_checkpoint(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("mqar")
    result = train(compose_train(run, MQAR))
    HydraConfig.instance().cfg = None
    assert result.status == "completed" and result.eval_sets is not None
    return run / "checkpoints" / "last.ckpt"


def test_an_mqar_model_at_twice_its_training_length(mqar_checkpoint, capsys):
    state = torch.load(mqar_checkpoint, weights_only=True)
    assert state[CHECKPOINT_TASK_KEY]["name"] == "mqar" and state[CHECKPOINT_TASK_KEY]["settings"]["seq_len"] == 64
    main([str(mqar_checkpoint), "data.seq_len=128", "data.num_kv_pairs=8", "data.eval_sets={}"])
    printed = capsys.readouterr().out
    assert "mqar (seq_len=128, num_kv_pairs=8, eval_sets={}):" in printed and "| val | 64 |" in printed
    main([str(mqar_checkpoint)])  # as trained: its validation set and the two evaluation sets
    printed = capsys.readouterr().out
    assert all(f"| {name} | 64 |" in printed for name in ("val", "2x", "4x"))
    records = [json.loads(line) for line in (mqar_checkpoint.parent / "eval.jsonl").read_text().splitlines()]
    assert [r["settings"]["seq_len"] for r in records] == [128, 64]  # appended, the first kept
    assert records[0]["scores"]["val"]["rows"] == 64 and 0 <= records[0]["scores"]["val"]["acc"] <= 1
    assert (mqar_checkpoint.parent / "eval.md").read_text().count("| set | rows | loss |") == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("data.seq_len=300", "data.seq_len=300 is longer than the model's context (256 tokens); evaluate at most 256"),
        ("data.seq_lenn=128", "data.seq_lenn is not a setting of task mqar; its settings are data.batch_size,"),
        ("seq_len=128", "'seq_len=128': give a change as data.<key>=<value>, e.g. data.seq_len=128"),
        ("data.num_kv_pairs=40", "data.num_kv_pairs=40, data.seq_len=64, data.vocab_size=512: MQAR needs"),
        ("data.num_kv_pairs=true", "data.num_kv_pairs=True must be an integer >= 0"),
        ("data.power_a=abc", "data.power_a='abc' must be a finite number"),
        ("data.seed=-3", "data.seed=-3 must be an integer >= 0"),
        ("data.eval_sets={long: {seq_len: 7}}", "data.eval_sets.long: data.num_kv_pairs=4, data.seq_len=7, "),
        ("data.eval_sets={long: {sq_len: 7}}", "data.eval_sets.long.sq_len is not a setting of task mqar; give"),
        ("data.num_train=100000000000", "data.num_train=100000000000: the task's rows need about "),
    ],
)
def test_a_bad_change_is_refused_in_one_line_before_anything_runs(mqar_checkpoint, change, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([str(mqar_checkpoint), change])
    printed = capsys.readouterr()
    assert stopped.value.code == 2 and printed.err.startswith(f"andrea-eval: error: {message}"), printed.err
    assert len(printed.err.strip().splitlines()) == 1 and printed.out == ""


def test_a_crafted_task_record_is_refused_by_the_task_s_own_rules(mqar_checkpoint, tmp_path, capsys):
    """A record whose settings are plain values of the wrong type: the task's typed settings refuse it."""
    state = torch.load(mqar_checkpoint, weights_only=True)
    state[CHECKPOINT_TASK_KEY]["settings"]["num_kv_pairs"] = True
    torch.save(state, tmp_path / "crafted.ckpt")
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / "crafted.ckpt")])
    printed = capsys.readouterr()
    assert stopped.value.code == 2
    assert printed.err == "andrea-eval: error: data.num_kv_pairs=True must be an integer >= 0\n"


def test_a_folder_eval_md_cannot_be_written_to_is_refused_before_evaluating(mqar_checkpoint, tmp_path, capsys):
    """eval.md a folder (as a read-only or special target): said before the sets are evaluated, nothing written."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "last.ckpt").symlink_to(mqar_checkpoint)
    (folder / "eval.md").mkdir()
    with pytest.raises(SystemExit) as stopped:
        main([str(folder / "last.ckpt")])
    printed = capsys.readouterr()
    assert stopped.value.code == 2 and printed.out == "", printed.out
    assert printed.err.startswith(f"andrea-eval: error: {folder / 'eval.md'} cannot be appended to (")
    assert sorted(p.name for p in folder.iterdir()) == ["eval.md", "last.ckpt"]


def test_a_checkpoint_without_a_task_is_refused_by_the_command(mqar_checkpoint, tmp_path, capsys):
    state = torch.load(mqar_checkpoint, weights_only=True)
    del state[CHECKPOINT_TASK_KEY]
    torch.save(state, tmp_path / "old.ckpt")
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / "old.ckpt")])
    printed = capsys.readouterr()
    assert stopped.value.code == 2 and f"names no synthetic task ({CHECKPOINT_TASK_KEY} is absent" in printed.err
    assert len(printed.err.strip().splitlines()) == 1 and printed.out == ""
