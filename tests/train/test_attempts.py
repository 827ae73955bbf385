"""A run resumed is one run: its result.json holds the curves of every attempt joined (a step trained twice
counted once, from the later attempt), the wall time summed, and each attempt with its steps and its end."""

import json

import lightning as L
import pytest
from omegaconf import open_dict

from andrea.train.lit.attempts import RunRecord
from andrea.train.lit.run_stats import RunStats
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train

EVERY_STEP = [*QUICK, "callbacks.last_checkpoint.every_n_train_steps=4"]  # 4 steps an epoch: a save at its end


class DieAt(L.Callback):
    """A process that dies after training `step` (past its last checkpoint), as a SIGKILL would leave it."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("died")


def run(run_dir, *overrides, die_at=None):
    cfg = compose_train(run_dir, [*EVERY_STEP, *overrides])
    if die_at is not None:
        with open_dict(cfg):
            cfg.callbacks.die = {"_target_": f"{__name__}.DieAt", "step": die_at}
    return train(cfg)


def steps(curve) -> list[int]:
    return [step for step, _ in curve]


def test_a_resumed_run_reports_every_attempt_joined(tmp_path):
    last = f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"
    first = run(tmp_path, "trainer.max_epochs=2")
    second = run(tmp_path, "trainer.max_epochs=3", last)  # trains on: steps 9-12
    ends = [(a["attempt"], a["start_step"], a["last_step"], a["ended"]) for a in second.attempts]
    assert ends == [(1, 0, 8, "finished"), (2, 8, 12, "finished")]
    assert second.curves is not None and first.curves is not None
    assert steps(second.curves["train"]) == list(range(1, 13))  # every step once
    assert second.curves["train"][:8] == first.curves["train"]  # the first attempt's points, as it measured them
    # the validation at step 8 came after the checkpoint the second attempt resumed from (saved at the epoch's
    # last batch, for an exact resume), so it went with the first attempt; every other one is there once
    assert steps(second.curves["val"]) == [4, 12]
    assert second.wall_s == pytest.approx(sum(a["wall_s"] for a in second.attempts), abs=0.5)
    assert second.wall_s > first.wall_s
    written = json.loads((tmp_path / "result.json").read_text())
    assert written["attempts"] == second.attempts and len(written["curves"]["train"]) == 12


def test_steps_read_for_a_checkpoint_are_in_it_whatever_the_logging_interval(tmp_path):
    """Steps are read every log_every_n_steps; a checkpoint reads the ones since first, and keeps them."""
    last = f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"
    run(tmp_path, "trainer.max_epochs=2", "trainer.log_every_n_steps=3")  # saved at step 8, read at 3 and 6
    second = run(tmp_path, "trainer.max_epochs=3", "trainer.log_every_n_steps=3", last)
    assert second.curves is not None and steps(second.curves["train"]) == list(range(1, 13))  # 7 and 8 too


def test_steps_trained_past_the_checkpoint_count_once_from_the_later_attempt(tmp_path):
    with pytest.raises(RuntimeError, match="died"):
        run(tmp_path, "trainer.max_epochs=2", die_at=6)  # saved at step 4, trained 5 and 6, died
    result = run(tmp_path, "trainer.max_epochs=2", f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}")
    ends = [(a["start_step"], a["last_step"], a["ended"]) for a in result.attempts]
    assert ends == [(0, 4, "unknown"), (4, 8, "finished")]  # no word of its end: not under SLURM, no result left
    assert result.curves is not None and steps(result.curves["train"]) == list(range(1, 9))


class Stop:
    received = None


def closed(state: dict, tmp_path, **result) -> str:
    """How a resumed RunRecord closes the attempt in `state`, with `result` left in the run dir."""
    if result:
        (tmp_path / "result.json").write_text(json.dumps({"run_dir": str(tmp_path), **result}))
    record = RunRecord(Stop(), 0.0, str(tmp_path / "checkpoints" / "last.ckpt"))
    record.load_state_dict(state)
    return record.earlier[-1]["ended"]


def attempt(ended=None, last=8) -> dict:
    return {"attempts": [{"attempt": 1, "start_step": 0, "last_step": last, "ended": ended, "wall_s": 3.5}]}


def test_the_end_of_an_earlier_attempt(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert closed(attempt("time limit"), tmp_path) == "time limit"  # the checkpoint saved on the signal says so
    assert closed(attempt("cancelled"), tmp_path) == "cancelled"  # SIGTERM, resumed by hand
    assert closed(attempt(), tmp_path) == "unknown"
    assert closed(attempt(), tmp_path, status="completed", global_step=8) == "finished"
    assert closed(attempt(last=4), tmp_path, status="completed", global_step=8) == "unknown"  # an earlier checkpoint
    assert closed(attempt(), tmp_path, status="failed", exit_code=1) == "failed"
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # SLURM ran the job again
    assert closed(attempt("cancelled"), tmp_path) == "preempted"
    (tmp_path / "result.json").unlink()
    assert closed(attempt(), tmp_path) == "preempted"
    assert closed(attempt("time limit"), tmp_path) == "time limit"


@pytest.mark.parametrize(
    "state, named",
    [
        ({"attempts": "many"}, "not a list"),
        ({"attempts": [{"attempt": 1}]}, "must have the keys"),
        (attempt(ended="because"), "ended 'because'"),
        ({"attempts": [{**attempt()["attempts"][0], "last_step": -1}]}, "last_step holds -1, not an integer >= 0"),
        ({"attempts": [{**attempt()["attempts"][0], "wall_s": float("nan")}]}, "wall_s holds nan, not a finite number"),
    ],
)
def test_a_crafted_run_record_is_refused(state, named, tmp_path):
    with pytest.raises(ValueError, match=named):
        RunRecord(Stop(), 0.0, None).load_state_dict(state)


@pytest.mark.parametrize(
    "change, named",
    [
        ({"train_curve": [[1, "x"]]}, "not a \\(step, loss\\) pair"),
        ({"train_curve": [[1.5, 2.0]]}, "not a \\(step, loss\\) pair"),
        ({"step_rates": [-1.0]}, "step_rates"),
        ({"tokens": "many"}, "tokens"),
        ({"extra": 1}, "must have the keys"),
    ],
)
def test_crafted_run_stats_are_refused(change, named):
    state = {**RunStats().state_dict(), **change}
    with pytest.raises(ValueError, match=named):
        RunStats().load_state_dict(state)


def test_a_checkpoint_with_a_crafted_run_record_is_refused_in_one_line(tmp_path):
    import torch

    from andrea.train.lit.resume import CheckpointRestoreError

    run(tmp_path / "run", "trainer.max_epochs=1")
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    (key,) = [k for k in state["callbacks"] if "RunRecord" in str(k)]
    state["callbacks"][key]["attempts"][0]["ended"] = "because"
    crafted = tmp_path / "crafted.ckpt"
    torch.save(state, crafted)
    with pytest.raises(CheckpointRestoreError) as refused:
        run(tmp_path / "resumed", "trainer.max_epochs=2", f"ckpt_path={crafted}")
    assert str(refused.value) == (
        f"ckpt_path={crafted}: its training state cannot be restored (ValueError: a run record's attempt ended "
        "'because', not one of finished, time limit, preempted, cancelled, failed, killed, unknown); give a "
        "checkpoint written by andrea-train, e.g. an earlier one in the same folder"
    )


def test_optimizer_state_of_another_shape_than_its_weight_is_refused_before_a_step(tmp_path):
    """A state tensor as large as some weight (so the file's own check passes) but shaped for another one: torch
    pairs states with weights by position and checks nothing."""
    import re

    import torch

    from andrea.train.lit.resume import CheckpointRestoreError

    run(tmp_path / "run", "trainer.max_epochs=1")
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    per_parameter = state["optimizer_states"][0]["state"]
    k = next(k for k, s in per_parameter.items() if s["exp_avg"].dim() == 2 and len(set(s["exp_avg"].shape)) == 2)
    shape = tuple(per_parameter[k]["exp_avg"].shape)
    per_parameter[k]["exp_avg"] = per_parameter[k]["exp_avg"].t().contiguous()
    crafted = tmp_path / "crafted.ckpt"
    torch.save(state, crafted)
    with pytest.raises(CheckpointRestoreError) as refused:
        run(tmp_path / "resumed", "trainer.max_epochs=2", f"ckpt_path={crafted}")
    assert re.fullmatch(
        rf"ckpt_path={re.escape(str(crafted))}: optimizer_states\[0\]\.state\[{k}\]\.exp_avg has shape "
        rf"{re.escape(str(shape[::-1]))}, its weight net\.\S+ {re.escape(str(shape))}; give a checkpoint written by "
        "andrea-train for this model",
        str(refused.value),
    ), str(refused.value)
    assert not (tmp_path / "resumed" / "checkpoints" / "last.ckpt").exists()  # not a step trained


def test_train_called_on_a_finished_run_says_so_and_returns_its_result_untouched(tmp_path, capsys):
    """From Python as from andrea-train: a finished run resumed with the settings it finished with trains nothing,
    says so in one line and returns the run's result; result.json stays byte for byte as it was."""
    first = run(tmp_path, "trainer.max_epochs=2")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    again = run(tmp_path, "trainer.max_epochs=2", f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}")
    said = capsys.readouterr().out.strip()
    assert said.endswith("nothing left to train, every file of the run left as it was; raise trainer.max_steps or "
                         "trainer.max_epochs to train on")  # fmt: skip
    assert again.train_loss == first.train_loss is not None  # its train loss and curves, not null and empty ones
    assert again.curves is not None and first.curves is not None
    assert again.curves["train"] == [list(point) for point in first.curves["train"]] != []
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
