"""hydra-submitit-launcher, with a row for every job of the sweep, a dead one's too.

The plugin gathers its jobs' results in one list comprehension: the first job whose
process died (SIGKILL, the OOM killer, a node lost) raises there, and the sweep ends
in a traceback with the other jobs' results unread. These launchers settle each job
on its own: a job that died gets a result.json with status `killed` and its exit code
(128 + the signal), one that raised outside Hydra's job wrapper `failed`; then the
sweep goes on to its summary and andrea-train's one-line report (andrea.cli.errors).

Checked against hydra-submitit-launcher 1.2.0 and submitit 1.5: it replaces the
executor's `map_array` for the duration of `launch` (tests/pipeline/test_launchers.py
fails if the plugin stops calling it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

from andrea.sweep import RESULT_FILE, job_failed


class JobDied(RuntimeError):
    """A job's process ended without a result."""


class _Settled:
    """A submitit job whose `results()` reports its failure as a FAILED JobReturn instead of raising."""

    def __init__(self, job, overrides: list[str], run_dir: Path):
        self.job, self.overrides, self.run_dir = job, overrides, run_dir

    def results(self) -> list[JobReturn]:
        try:
            return self.job.results()
        except Exception:  # submitit's UncompletedJobError / FailedJobError
            returncode = getattr(getattr(self.job, "_process", None), "returncode", None)  # local jobs only
            killed = returncode is not None and returncode < 0
            error = JobDied(f"killed by signal {-returncode}" if killed else f"its process died ({self.job.state})")
            if not (self.run_dir / RESULT_FILE).exists():  # the job's own report (interrupted, ...) wins
                job_failed(self.run_dir, self.overrides, error, 128 - returncode if killed else returncode, "killed" if killed else "failed")
            ret = JobReturn(overrides=self.overrides, status=JobStatus.FAILED)
            ret._return_value = error  # what Hydra's sweeper raises after the batch: andrea-train reports it
            return [ret]


class _KeepEveryJob:
    def launch(self, job_overrides, initial_job_idx: int):
        import submitit

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        original = submitit.AutoExecutor.map_array

        def map_array(executor, fn, overrides: list, *rest: Any):
            jobs = original(executor, fn, overrides, *rest)
            numbers = rest[1]  # the job numbers (idx) the plugin passes after "hydra.sweep.dir"
            return [_Settled(job, list(o), sweep_dir / str(n)) for job, o, n in zip(jobs, overrides, numbers)]

        submitit.AutoExecutor.map_array = map_array
        try:
            return super().launch(job_overrides, initial_job_idx)
        finally:
            submitit.AutoExecutor.map_array = original


class SubmititLocal(_KeepEveryJob, LocalLauncher):
    """hydra/launcher=local: every job a local process."""


class SubmititSlurm(_KeepEveryJob, SlurmLauncher):
    """hydra/launcher=slurm: every job a SLURM job."""
