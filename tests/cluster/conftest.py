"""The local SLURM cluster the cluster tests submit to (scripts/slurm_cluster.sh), and what they share:
the sweep they start, the scheduler commands they send, the losses they read back.

The cluster is started for these tests when it is not up, and stopped after them if they started it.
Where it cannot be started (no slurm-wlm packages, not root) the tests are skipped with the script's own
reason, except under CI=true, where that is a failure: CI installs the packages (.ci/run).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.train.test_resume import wait_for  # noqa: F401  # until a file appears, the process alive

ROOT = Path(__file__).parents[2]
CLUSTER = ROOT / "scripts" / "slurm_cluster.sh"
TRAIN = [sys.executable, "-m", "andrea.cli.train"]
# Small runs, one CPU per job (two jobs at a time on two cores), every step logged
SMALL = ["logger=csv", "trainer.log_every_n_steps=1", "hydra.launcher.cpus_per_task=1", "data.num_val=64"]


@pytest.fixture(scope="session")
def slurm_env() -> Iterator[dict[str, str]]:
    """The environment a user's shell has after `eval "$(scripts/slurm_cluster.sh env)"`."""
    started = False
    if subprocess.run([str(CLUSTER), "status"], capture_output=True).returncode != 0:
        start = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=180)
        if start.returncode != 0:
            reason = f"no SLURM cluster can be started here: {start.stderr.strip().splitlines()[-1:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        started = True
    exports = subprocess.run([str(CLUSTER), "env"], capture_output=True, text=True, check=True).stdout
    name, _, value = exports.strip().removeprefix("export ").partition("=")
    yield {**os.environ, name: value}
    if started:
        subprocess.run([str(CLUSTER), "stop"], capture_output=True, timeout=120)


def sweep(cwd: Path, env: dict[str, str], *overrides: str) -> subprocess.Popen:
    """`andrea-train -m hydra/launcher=slurm` with `overrides`, its sweep dir cwd/sweep, running."""
    command = [*TRAIN, "-m", "hydra/launcher=slurm", *SMALL, f"hydra.sweep.dir={cwd / 'sweep'}", *overrides]
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slurm(env: dict[str, str], *command: str) -> str:
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=60).stdout


def array_task(env: dict[str, str], task: int, state: str = "RUNNING", timeout: float = 180) -> str:
    """The scheduler's id (`<array>_<task>`) of the sweep's job number `task`, once it is in `state`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in slurm(env, "squeue", "-h", "-r", "-o", "%i %T").splitlines():
            job_id, job_state = line.split()
            if job_id.endswith(f"_{task}") and job_state == state:
                return job_id
        time.sleep(0.5)
    raise AssertionError(f"job {task} of the sweep was not {state} within {timeout} s: {slurm(env, 'squeue')}")


def release_now(env: dict[str, str], job_id: str) -> None:
    """A requeued job is held for two minutes (its BeginTime) before it may run again: start it now."""
    array_task(env, int(job_id.rsplit("_", 1)[1]), state="PENDING")
    slurm(env, "scontrol", "update", f"JobId={job_id}", "StartTime=now")


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def versions(run_dir: Path) -> list[dict[int, str]]:
    """Each attempt's (the CSV logger's version_<n>) step -> train/loss_step, the exact decimal it wrote."""
    out = []
    for version in sorted((run_dir / "csv").glob("version_*"), key=lambda p: int(p.name.split("_")[1])):
        with open(version / "metrics.csv") as f:
            out.append({int(r["step"]): r["train/loss_step"] for r in csv.DictReader(f) if r.get("train/loss_step")})
    return out


def unbroken(run_dir: Path, *overrides: str) -> dict[int, str]:
    """The losses of the same run trained in one go, in this process's machine, without a scheduler."""
    small = [o for o in SMALL if not o.startswith("hydra.launcher")]
    done = subprocess.run([*TRAIN, *small, f"hydra.run.dir={run_dir}", *overrides], cwd=run_dir.parent,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (losses,) = versions(run_dir)
    return losses
