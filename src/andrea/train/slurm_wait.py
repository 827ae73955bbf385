"""How hydra/launcher=slurm waits for a sweep's jobs: until each left its result or the scheduler ended it, and
no longer than hydra.launcher.wait_limit_min; a controller that stops answering is said, not waited on silently.

    wait_for(job, deadline)    until every task of a submitit job left its result, or the scheduler ended it
                               (its JobEnd); GaveUp past the deadline
    unsettled_line(ids, min)   the sweep's one line when it gave up: each job and its last known state

submitit, the launcher's engine, reads job states from `sacct` only: on a cluster without accounting
(slurm-wlm as Debian installs it, scripts/slurm_cluster.sh) it never learns that a job was cancelled
and waits for it forever. Hence `wait_for`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from andrea.train.slurm import SEEN, JobEnd, Sighting, end_from, job_end, scontrol_record

RESULT_GRACE_S = 15  # a result written as the job ended may reach a shared file system late


SILENT: dict[str, bool] = {}  # job id -> whether the controller's last word on it was no answer


class GaveUp(TimeoutError):
    """A sweep's wait for its jobs ran past hydra.launcher.wait_limit_min."""


def wait_for(job: Any, deadline: float | None = None, poll_s: float = 1.0, ask_every_s: float = 10.0) -> JobEnd | None:
    """Wait until every task of the submitit job `job` has left its result (None: `job.results()` reads
    them at once) or the scheduler says the job ended without (its JobEnd). A requeued job lives on. Past
    `deadline` (time.monotonic()), GaveUp; while the controller does not answer, a line says so, once."""
    results = [job.task(k).paths.result_pickle for k in range(job.num_tasks)]
    job_id, asked, silent = str(job.job_id), -ask_every_s, False
    while not all(path.exists() for path in results):
        if time.monotonic() - asked >= ask_every_s:
            asked = time.monotonic()
            record = scontrol_record(job_id)
            if (record is None) != silent:  # the controller stopped answering, or answers again
                silent = SILENT[job_id] = record is None
                said = "does not answer; still waiting for" if silent else "answers again about"
                print(f"hydra/launcher=slurm: the SLURM controller {said} job {job_id}", file=sys.stderr, flush=True)
            end = end_from(job_id, record)
            if end is not None:
                return _late_results(results, poll_s, end)
        if deadline is not None and time.monotonic() >= deadline:
            raise GaveUp(job_id)
        time.sleep(poll_s)
    return None


def _late_results(results: list[Path], poll_s: float, end: JobEnd) -> JobEnd | None:
    """`end`, unless the results of a job that ended reach the file system within RESULT_GRACE_S."""
    deadline = time.monotonic() + RESULT_GRACE_S
    while not all(path.exists() for path in results) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return None if all(path.exists() for path in results) else end


def unsettled_line(job_ids: list[str], limit_min: float) -> str:
    """The one line of a sweep that gave up waiting: each job still unsettled, with its last known state."""
    if not any(
        SILENT.get(job_id) for job_id in job_ids
    ):  # one more look (each up to a minute: not while the controller is silent)
        for job_id in job_ids:
            job_end(job_id)
    jobs = "; ".join(f"job {job_id} {SEEN.get(job_id, Sighting())}" for job_id in job_ids)
    return (
        f"hydra/launcher=slurm gave up waiting after hydra.launcher.wait_limit_min={limit_min:g} minutes for "
        f"{len(job_ids)} job(s): {jobs}; they may still run and write into their run dirs (squeue, scancel), or "
        "raise hydra.launcher.wait_limit_min (null: no limit)"
    )
