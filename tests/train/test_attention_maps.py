"""The maps callback off the training thread: its schedule, a slow drawer skipped not waited for,
pending work finished before a checkpoint and at the end, and training unchanged by it."""

import csv
import os
import threading
import time

import pytest
import torch

from andrea.models.gpt import GPT
from andrea.train.lit.attention_maps import AttentionMaps
from andrea.train.lit.map_probe import probe_job
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train


def recorded_steps(maps, last):
    steps, step = [0], 0
    while (step := maps.next_record(step)) < last:
        steps.append(step)
    return steps + [last]


def test_log_spaced_records_a_long_run_tens_of_times_not_thousands():
    assert recorded_steps(AttentionMaps(every_n_steps=50), 2000) == [0, 50, 100, 200, 400, 800, 1600, 2000]
    assert recorded_steps(AttentionMaps(every_n_steps=50, schedule="linear"), 2000)[:4] == [0, 50, 100, 150]
    assert len(recorded_steps(AttentionMaps(every_n_steps=50), 100_000)) == 13
    with pytest.raises(ValueError, match="schedule='often' must be one of log, linear"):
        AttentionMaps(schedule="often")


@pytest.mark.slow  # reason: a training run with a drawer slowed on purpose (4 s)
def test_a_slow_drawer_is_skipped_never_waited_for_and_finished_at_the_end(tmp_path, monkeypatch):
    """Each drawing takes 1 s; training does not wait for them: records are skipped and counted, the
    ones taken are finished before every checkpoint and before the summary."""
    draw, threads = AttentionMaps._draw, set()

    def slow(self, job):
        threads.add((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        time.sleep(1.0)
        return draw(self, job)

    monkeypatch.setattr(AttentionMaps, "_draw", slow)
    overrides = [*QUICK, "trainer.max_epochs=2", "callbacks.attention_maps.every_n_steps=1",
                 "callbacks.attention_maps.schedule=linear", "callbacks.attention_maps.max_pending=1"]  # fmt: skip
    started = time.perf_counter()
    result = train(compose_train(tmp_path, overrides))
    seconds = time.perf_counter() - started
    assert threads == {("andrea-maps_0", 19)}  # drawn on the worker, not the training thread, at the lowest priority
    assert result.attention_maps_skipped > 0 and result.global_step == 8
    with open(tmp_path / "head_roles.csv") as f:  # every record scored, its drawing skipped or not
        assert sorted({int(row["step"]) for row in csv.DictReader(f)}) == list(range(9))
    drawn = sorted(p.name for p in (tmp_path / "attention_maps").glob("*.png"))
    assert len(drawn) + result.attention_maps_skipped == 9  # steps 0..8: drawn or skipped, each once
    assert "layer0_step000008.png" in drawn  # the end of training is always drawn, and waited for
    assert seconds < 1.0 * 9  # not one second per record: the training thread did not wait for each
    assert result.roles and result.verdict  # the last record's results reached the summary


def test_the_dashboard_does_not_change_training(tmp_path):
    with_maps = train(compose_train(tmp_path / "a", [*QUICK, "callbacks.attention_maps.every_n_steps=1"]))
    without = train(compose_train(tmp_path / "b", [*QUICK, "~callbacks.attention_maps"]))
    assert with_maps.val_loss == without.val_loss and with_maps.train_loss == without.train_loss


@pytest.mark.parametrize(
    "name, decays",
    [("linear", False), ("deltanet", False), ("gated_deltanet", True), ("gla", True), ("retention", True)],
)
def test_a_mixer_s_map_says_whether_its_implied_weights_decay(name, decays):
    """The subtitle is what the mixer's implied weights are: DeltaNet's and linear attention's state has no decay
    (their maps said "decay-masked"), Gated DeltaNet's, GLA's and retention's has; the delta rule's are named."""
    torch.manual_seed(0)
    mixer = {"name": name, "n_head": 4} | ({"normalize": False, "feature_map": "identity"} if name == "linear" else {})
    net = GPT(vocab_size=17, max_context=16, n_layer=1, d_model=16, attention=dict(n_head=4), mixer=mixer,
              layout=[name]).eval()  # fmt: skip
    ids = torch.randint(0, 17, (1, 8))
    with torch.no_grad():
        _, weights = net(ids, return_weights=True)
    meaning = probe_job(net, weights, ids[0].tolist(), 0, None, 0, None, None, {}).styles[0].meaning  # the subtitle
    assert ("decay-masked" in meaning) == decays and ("no decay" in meaning) == (not decays)
    assert ("delta rule" in meaning) == name.endswith("deltanet")
