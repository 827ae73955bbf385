"""Sweeps through a real SLURM scheduler (scripts/slurm_cluster.sh): a job array whose cancelled job keeps its
row, a sweep refused before it submits, a refused config's row, preempted and timed-out jobs that resume exactly,
and DDP across SLURM's tasks."""

import csv
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import CLUSTER, array_task, finish, release_now, slurm, sweep, unbroken, versions, wait_for

pytestmark = pytest.mark.alone  # one SLURM cluster on the machine, started and stopped by these tests

# Long enough to be stopped part-way (640 steps), with last.ckpt every 10 steps
RESUMABLE = ["data.num_train=1024", "trainer.max_epochs=40", "callbacks.last_checkpoint.every_n_train_steps=10"]
TOLERANCE = 2e-5  # DDP: float sums in another order (per-process means, then the all-reduce)


def rows(sweep_dir: Path) -> list[dict[str, str]]:
    with open(sweep_dir / "summary.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow(reason="a 4-job SLURM array, one job cancelled, ~60 s")
def test_an_array_sweep_keeps_a_row_for_the_job_scancel_ended(slurm_env, tmp_path):
    process = sweep(tmp_path, slurm_env, "trainer.max_epochs=1,1,1,1000", "data.num_train=256")
    job = array_task(slurm_env, 3)
    wait_for(tmp_path / "sweep" / "3" / "checkpoints" / "last.ckpt", process)  # it is training
    slurm(slurm_env, "scancel", job)
    code, _, err = finish(process)
    assert code == 1, err[-3000:]  # a sweep with a job that did not complete ends in one line
    assert "1 of 4 jobs did not complete: job 3" in err
    summary = rows(tmp_path / "sweep")
    assert [row["status"] for row in summary] == ["completed"] * 3 + ["killed"]
    killed = summary[3]
    assert f"the scheduler ended job {job}: CANCELLED" in killed["error"], killed
    assert killed["exit_code"] == "143"  # SIGTERM, as SLURM reports it (0:15)
    assert "after saving" in killed["error"]  # the job got the signal first and kept its last.ckpt
    for row in summary:  # every job's log, the cancelled one's too, is a file the row names
        assert Path(row["log"]).is_file() and row["log"].endswith("_log.err"), row
    page = (tmp_path / "sweep" / "report.html").read_text()
    assert "killed" in page and ".submitit/" in page and '">log</a>' in page


@pytest.mark.slow(reason="a sweep refused before submitting, ~10 s")
def test_a_sweep_with_a_refused_job_submits_nothing(slurm_env, tmp_path):
    code, _, err = finish(sweep(tmp_path, slurm_env, "data.batch_size=16,0"))
    assert code == 2, err[-3000:]
    assert re.search(r"job 1 \(.*data.batch_size=0\) is refused, so the sweep launched no job", err), err[-3000:]
    assert not (tmp_path / "sweep" / ".submitit").exists()  # nothing reached the scheduler


@pytest.mark.slow(reason="a SLURM job refused by its config, ~20 s")
def test_a_job_whose_config_is_refused_gets_a_failed_row_with_exit_code_2(slurm_env, tmp_path):
    # Hydra's basic sweeper launches without the sweep's check, as a sweeper that draws its points as it goes
    # does: the job itself refuses its config, and the launcher keeps its row
    code, _, err = finish(sweep(tmp_path, slurm_env, "hydra/sweeper=basic", "data.batch_size=0"))
    assert code == 1, err[-3000:]
    (row,) = rows(tmp_path / "sweep")
    assert (row["status"], row["exit_code"]) == ("failed", "2") and "data.batch_size" in row["error"], row


@pytest.mark.slow(reason="two SLURM jobs stopped, requeued and resumed, and the same runs unbroken, ~2 min")
def test_preempted_and_timed_out_jobs_resume_exactly(slurm_env, tmp_path):
    process = sweep(tmp_path, slurm_env, *RESUMABLE, "seed=5,6")
    preempted, timed_out = array_task(slurm_env, 0), array_task(slurm_env, 1)
    for job in range(2):
        wait_for(tmp_path / "sweep" / str(job) / "checkpoints" / "last.ckpt", process)
    slurm(slurm_env, "scontrol", "requeue", preempted)  # SIGTERM now, SLURM runs it again
    slurm(slurm_env, "scancel", "--signal=USR2", timed_out)  # what SLURM sends signal_delay_s before the time limit
    release_now(slurm_env, preempted)
    release_now(slurm_env, timed_out)  # requeued by the job itself
    code, _, err = finish(process)
    assert code == 0, err[-3000:]
    assert [row["status"] for row in rows(tmp_path / "sweep")] == ["completed", "completed"]
    for job, seed, signum in ((0, 5, 15), (1, 6, 12)):
        run_dir = tmp_path / "sweep" / str(job)
        first, second = versions(run_dir)
        stopped = max(first)
        assert min(second) == stopped + 1  # resumed at the step after the last one it trained
        reference = unbroken(tmp_path / f"unbroken{job}", *RESUMABLE, f"seed={seed}")
        assert first | second == reference  # every step's loss, bit for bit (the same decimal strings)
        assert "ckpt_path" not in rows(tmp_path / "sweep")[job]["overrides"]  # the user's overrides only
        log = Path(rows(tmp_path / "sweep")[job]["log"]).read_text()
        assert re.search(rf"stopped by signal {signum} at step {stopped + 1}; saved .*last\.ckpt", log), log[-3000:]
        assert "requeued (restart 1): resuming from" in log
        record = json.loads((run_dir / "result.json").read_text())  # the whole run, both attempts
        assert [(a["start_step"], a["last_step"], a["ended"]) for a in record["attempts"]] == [
            (0, stopped + 1, "preempted" if signum == 15 else "time limit"), (stopped + 1, max(second) + 1, "finished")
        ]  # fmt: skip
        assert [step for step, _ in record["curves"]["train"]] == list(range(1, max(second) + 2))
        assert record["wall_s"] == pytest.approx(sum(a["wall_s"] for a in record["attempts"]), abs=1.0)
    assert (tmp_path / "sweep" / "0" / ".hydra" / "attempt-2" / "overrides.yaml").is_file()  # each attempt's config


@pytest.mark.slow(reason="a 2-task SLURM job on gloo and one process, ~60 s")
def test_a_two_task_job_trains_as_one_process_with_the_whole_batch(slurm_env, tmp_path):
    run = ["data.num_train=512", "trainer.max_epochs=2", "seed=3"]
    code, _, err = finish(sweep(tmp_path, slurm_env, *run, "trainer=ddp_cpu", "data.batch_size=16"))
    assert code == 0, err[-3000:]
    (two,) = versions(tmp_path / "sweep" / "0")
    one = unbroken(tmp_path / "one", *run, "data.batch_size=32")  # 2 tasks x 16 = 32 per step
    assert one.keys() == two.keys() and len(one) == 2 * 512 // 32
    assert max(abs(float(one[s]) - float(two[s])) / abs(float(one[s])) for s in one) < TOLERANCE
    # the tasks' output (submitit's logs) and the job's log (Hydra's, where a multirun job's INFO lines go)
    logs = [*(tmp_path / "sweep" / ".submitit").glob("*/*_log.err"), *(tmp_path / "sweep" / "0").glob("*.log")]
    ranks = {m for log in logs for m in re.findall(r"GLOBAL_RANK: (\d), MEMBER: \d/2", log.read_text())}
    assert ranks == {"0", "1"}  # Lightning took the ranks from SLURM's environment: two tasks, one job


@pytest.mark.slow(reason="stops and starts the local cluster twice, ~10 s")
def test_stop_leaves_no_daemon_and_no_state_behind(slurm_env):
    folder = Path(slurm_env["SLURM_CONF"]).parent
    system = [Path(p) for p in ("/etc/slurm", "/var/spool/slurmctld", "/var/spool/slurmd", "/var/log/slurm",
                                "/run/munge", "/var/lib/munge", "/etc/munge", "/var/log/munge")]  # fmt: skip

    def system_state() -> dict:
        return {p: sorted((q, q.stat().st_mtime) for q in p.rglob("*")) if p.exists() else None for p in system}

    def cluster(command: str) -> None:
        subprocess.run([str(CLUSTER), command], check=True, capture_output=True, timeout=180)

    cluster("stop")
    try:
        before = system_state()
        cluster("start")
        cluster("stop")
        for name in ("slurmd", "slurmctld", "slurmstepd", "munged"):  # pgrep -x: one name at a time
            daemons = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
            assert daemons.returncode == 1 and daemons.stdout == "", f"{name} still running: {daemons.stdout}"
        assert not folder.exists()
        assert system_state() == before  # nothing written outside its folder
    finally:  # the cluster as the other tests (and a developer) had it
        cluster("start")


@pytest.mark.slow(reason="restarts the local cluster's daemons, ~10 s")
def test_restart_keeps_the_queue_running_jobs_and_job_ids(slurm_env):
    held = slurm(slurm_env, "sbatch", "--parsable", "--output=/dev/null", "--hold", "--wrap", "sleep 1").strip()
    running = slurm(slurm_env, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 120").strip()
    try:
        deadline = time.monotonic() + 60
        while "RUNNING" not in slurm(slurm_env, "squeue", "-h", "-j", running, "-o", "%T"):
            assert time.monotonic() < deadline, slurm(slurm_env, "squeue")
            time.sleep(0.5)
        subprocess.run([str(CLUSTER), "restart"], check=True, capture_output=True, timeout=180)
        queue = dict(line.split() for line in slurm(slurm_env, "squeue", "-h", "-o", "%i %T").splitlines())
        assert queue == {held: "PENDING", running: "RUNNING"}  # the queue and the running job, as they were
        after = slurm(slurm_env, "sbatch", "--parsable", "--output=/dev/null", "--hold", "--wrap", "sleep 1").strip()
        assert int(after) == int(running) + 1  # job ids go on
    finally:
        subprocess.run(["scancel", "--partition=andrea"], env=slurm_env, check=False)
