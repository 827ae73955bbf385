"""hydra/launcher=slurm's pieces that need no cluster: how the scheduler's answers are read, what a requeued
job resumes from, the GPUs asked for, and the run-dir lock a requeued job waits for. tests/cluster runs them
against a real SLURM."""

import os
import subprocess
import sys
import time

import lightning as L
import pytest

from andrea.train import slurm
from andrea.train.run_dir import RunDirInUse, hold


@pytest.mark.parametrize(
    ("field", "code"), [("0:0", 0), ("2:0", 2), ("0:15", 143), ("0:9", 137), ("", None), ("junk", None)]
)
def test_slurm_s_exit_code_reads_as_a_shell_s(field, code):
    assert slurm._exit_code(field) == code


def test_a_job_end_names_the_state_the_reason_and_the_exit_code():
    assert str(slurm.JobEnd("CANCELLED", "None", 143)) == "CANCELLED (exit code 143)"
    assert str(slurm.JobEnd("TIMEOUT", "TimeLimit", None)) == "TIMEOUT (TimeLimit; exit code unknown)"


SCONTROL = {  # `scontrol show job --oneliner <id>`, cut short: a comment posing as a state comes later
    "1_0": "JobId=2 ArrayJobId=1 ArrayTaskId=0 JobState=RUNNING Reason=None ExitCode=0:0 Comment=JobState=FAILED",
    "1_1": "JobId=3 ArrayJobId=1 ArrayTaskId=1 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 WorkDir=/a b",
}
SACCT = {"1_2": "1_2|CANCELLED by 0|0:15\n"}  # `sacct --noheader --parsable2 -X -o JobID,State,ExitCode -j <id>`


def answers(controller_up: bool = True):
    def run(command):
        job_id = command[-1]
        if command[0] == "scontrol":
            if not controller_up:
                return subprocess.CompletedProcess(command, 1, "", "Unable to contact slurm controller")
            if job_id in SCONTROL:
                return subprocess.CompletedProcess(command, 0, SCONTROL[job_id] + "\n", "")
            return subprocess.CompletedProcess(command, 1, "", "slurm_load_jobs error: Invalid job id specified")
        if job_id in SACCT:
            return subprocess.CompletedProcess(command, 0, SACCT[job_id], "")
        return subprocess.CompletedProcess(command, 1, "", "Slurm accounting storage is disabled")

    return run


def test_the_scheduler_s_record_decides_whether_a_job_lives(monkeypatch):
    monkeypatch.setattr(slurm, "_run", answers())
    assert slurm.job_end("1_0") is None  # running (its comment is no state)
    assert slurm.job_end("1_1") == slurm.JobEnd("TIMEOUT", "TimeLimit", 143)
    assert slurm.job_end("1_2") == slurm.JobEnd("CANCELLED", "CANCELLED by 0", 143)  # left the controller: sacct
    assert slurm.job_end("1_3") == slurm.JobEnd("UNKNOWN", "no longer known to the scheduler", None)
    monkeypatch.setattr(slurm, "_run", answers(controller_up=False))
    assert slurm.job_end("1_1") is None  # no answer is no end: asked again later


def test_a_requeued_job_resumes_from_its_run_dir_s_last_checkpoint(monkeypatch, tmp_path):
    checkpoint = tmp_path / "it's" / "checkpoints" / "last.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"")
    run_dir = checkpoint.parents[1]
    assert slurm.resume_overrides(["seed=1"], run_dir) == ["seed=1"]  # the first attempt
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    quoted = str(checkpoint).replace("'", "\\'")  # a quote in the path, escaped in Hydra's quoted value
    assert slurm.resume_overrides(["seed=1"], run_dir) == ["seed=1", f"ckpt_path='{quoted}'"]
    assert slurm.resume_overrides(["ckpt_path=mine.ckpt"], run_dir) == ["ckpt_path=mine.ckpt"]  # the user's wins
    assert slurm.resume_overrides(["seed=1"], tmp_path / "fresh") == ["seed=1"]  # requeued before any checkpoint


def test_an_array_task_is_requeued_by_its_own_id(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    assert slurm.this_job_id() == "17"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "12")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert slurm.this_job_id() == "12_3"


def test_gpus_are_asked_for_only_on_gpus():
    assert slurm.gpus_per_node("gpu", 4) == 4 and slurm.gpus_per_node("cpu", 2) is None


def test_a_requeued_job_waits_for_its_earlier_attempt_to_release_the_run_dir(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from andrea.train.run_dir import hold\nwith hold({str(tmp_path)!r}):\n"
         "    print('held', flush=True)\n    import time; time.sleep(1)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with pytest.raises(RunDirInUse, match=f"pid {holder.pid}"), hold(tmp_path):
        pass  # a second run is refused at once...
    start = time.monotonic()
    with hold(tmp_path, wait_s=60):  # ...a requeued one waits for the earlier attempt to exit
        assert time.monotonic() - start > 0.2  # the holder's second, less its start
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
    assert holder.wait(timeout=30) == 0


def test_the_slurm_launcher_names_what_is_missing_in_one_line(monkeypatch):
    """No SLURM client on PATH, or no controller answering: one line naming it, before any job is submitted."""
    import shutil
    import subprocess

    from andrea.train import slurm

    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "srun" else f"/usr/bin/{tool}")
    missing = slurm.cluster_problem()
    assert missing is not None and missing.startswith("hydra/launcher=slurm needs SLURM's srun on PATH")
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
    down = subprocess.CompletedProcess(["scontrol", "ping"], 1, "Slurmctld(primary) at localhost is DOWN\n", "")
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: down)
    refused = slurm.cluster_problem()
    assert refused == (
        "hydra/launcher=slurm: no SLURM controller answers (scontrol ping: Slurmctld(primary) at localhost is DOWN); "
        "start it (scripts/slurm_cluster.sh start), or use hydra/launcher=local"
    )
    up = subprocess.CompletedProcess(["scontrol", "ping"], 0, "Slurmctld(primary) at localhost is UP\n", "")
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: up)
    assert slurm.cluster_problem() is None


def test_a_time_limit_warning_outside_training_requeues_only_a_run_that_has_not_ended(tmp_path, capsys):
    """Before training the job stops (128 + n: it requeues itself); once its result says it ended, the warning is
    ignored: submitit's own handler requeued a finished job, past max_num_timeout."""
    import json
    import signal

    handle = slurm.outside_training(tmp_path)
    with pytest.raises(SystemExit) as stop:
        handle(signal.SIGUSR2, None)  # the first attempt, before any result
    assert stop.value.code == 128 + signal.SIGUSR2
    (tmp_path / "result.json").write_text(json.dumps({"status": "interrupted", "run_dir": str(tmp_path)}))
    with pytest.raises(SystemExit):
        handle(signal.SIGUSR2, None)  # a requeued attempt, before it trains on
    for status in ("completed", "failed"):
        (tmp_path / "result.json").write_text(json.dumps({"status": status, "run_dir": str(tmp_path)}))
        handle(signal.SIGUSR2, None)
        assert f"came after the run {status}: not requeued" in capsys.readouterr().err


def test_a_time_limit_warning_after_training_leaves_the_run_completed(tmp_path, capsys):
    """The warning arriving while a finished run validates and writes its result: ignored (the handler that was
    there before, here one that stops the job as submitit's requeue does, is back once the run returns)."""
    import signal

    from omegaconf import open_dict

    from andrea.train.pipeline import train
    from tests.compose import QUICK, compose_train

    cfg = compose_train(tmp_path, QUICK)
    with open_dict(cfg):
        cfg.callbacks.warn = {"_target_": f"{__name__}.WarnAtFinalValidation"}

    def requeue(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGUSR2, requeue)
    try:
        result = train(cfg)
        assert signal.getsignal(signal.SIGUSR2) is requeue
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert result.status == "completed" and [a["ended"] for a in result.attempts] == ["finished"]
    assert "(the time limit's warning) came after training ended: nothing to save" in capsys.readouterr().err


class WarnAtFinalValidation(L.Callback):
    """SIGUSR2 to this process as the run's final validation starts (after fit)."""

    def on_validation_start(self, trainer, pl_module) -> None:
        import os
        import signal

        if trainer.state.fn == "validate":
            os.kill(os.getpid(), signal.SIGUSR2)


def test_a_requeued_job_is_labelled_with_the_user_s_overrides_only(monkeypatch, tmp_path):
    from andrea.train.hydra_run import task_overrides
    from tests.compose import compose_train

    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setattr(slurm, "_ADDED", [])  # this test's process stands for the job's
    overrides = slurm.resume_overrides(["seed=1"], tmp_path)
    assert overrides[-1].startswith("ckpt_path=")
    compose_train(tmp_path, overrides)
    assert task_overrides() == ["seed=1"]  # the row, the job's line, the result's overrides, the logger's run name


class Waiting:
    """A submitit job of one task whose result never comes."""

    def __init__(self, job_id: str, folder) -> None:
        self.job_id, self.num_tasks, self.folder = job_id, 1, folder

    def task(self, k: int):
        from types import SimpleNamespace

        return SimpleNamespace(paths=SimpleNamespace(result_pickle=self.folder / f"{self.job_id}_result.pkl"))


def test_a_sweep_gives_up_waiting_in_one_line_naming_each_job_and_its_last_state(monkeypatch, tmp_path, capsys):
    """A controller that stops answering is said at once; past the deadline the wait gives up, and the sweep's
    line names every job left with the state the scheduler last gave (time.time() pinned for the clock)."""
    from andrea.train import slurm_wait

    controller = {"up": True}
    monkeypatch.setattr(slurm, "_run", lambda command: answers(controller["up"])(command))
    monkeypatch.setattr(slurm, "SEEN", {})
    monkeypatch.setattr(slurm_wait, "SEEN", slurm.SEEN)
    monkeypatch.setattr(time, "localtime", lambda at=None: time.gmtime(0))
    asked = []

    def sleep(seconds: float) -> None:  # the controller goes silent after the first answer
        asked.append(seconds)
        controller["up"] = False

    monkeypatch.setattr(slurm_wait.time, "sleep", sleep)
    monkeypatch.setattr(slurm_wait, "RESULT_GRACE_S", 0.05)  # an ended job's results are not waited for 15 s here
    with pytest.raises(slurm_wait.GaveUp, match="1_0"):
        slurm_wait.wait_for(Waiting("1_0", tmp_path), deadline=time.monotonic() + 0.05, ask_every_s=0.0)
    assert "the SLURM controller does not answer; still waiting for job 1_0" in capsys.readouterr().err
    line = slurm_wait.unsettled_line(["1_0", "9_9"], 30)
    assert line == (
        "hydra/launcher=slurm gave up waiting after hydra.launcher.wait_limit_min=30 minutes for 2 job(s): "
        "job 1_0 RUNNING at 00:00:00; job 9_9 state unknown (the controller never answered for it); they may still "
        "run and write into their run dirs (squeue, scancel), or raise hydra.launcher.wait_limit_min (null: no limit)"
    )
    controller["up"] = True
    with pytest.raises(slurm_wait.GaveUp):
        slurm_wait.wait_for(Waiting("1_0", tmp_path), deadline=time.monotonic(), ask_every_s=0.0)
    assert slurm_wait.wait_for(Waiting("1_1", tmp_path), deadline=None, ask_every_s=0.0) is not None  # TIMEOUT: ended


def test_the_wait_limit_is_a_setting_of_hydra_s_launcher_config(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional `sweep` extra is not installed")
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException

    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", ["hydra/launcher=slurm", "hydra.launcher.wait_limit_min=30"], return_hydra_config=True)
        assert cfg.hydra.launcher.wait_limit_min == 30.0 and cfg.hydra.launcher.max_num_timeout == 3
        with pytest.raises(ConfigCompositionException, match="wait_limit_min"):
            compose("train", ["hydra/launcher=slurm", "hydra.launcher.wait_limit_min=soon"], return_hydra_config=True)
