"""hydra/launcher=slurm's pieces that need no cluster: how the scheduler's answers are read, what a requeued
job resumes from, the GPUs asked for, and the run-dir lock a requeued job waits for. tests/cluster runs them
against a real SLURM."""

import os
import subprocess
import sys
import time

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
