"""hydra-submitit-launcher, with a row for every job of the sweep, a dead one's too.

The plugin gathers its jobs' results in one list comprehension: the first job whose
process died (SIGKILL, the OOM killer, a node lost) raises there, and the sweep ends
in a traceback with the other jobs' results unread. These launchers settle each job
on its own: a job whose process ended without a result gets a result.json with
status `killed` and the path of its log (a job that raised reports `failed` and its
exit code itself, through andrea.train.sweep.SweepSummary); then the sweep goes on to its
summary and andrea-train's one-line report (andrea.cli.app). submitit's local
controller does not keep its tasks' exit codes, so a killed job's is left blank.

The submission, built from the plugin's own pieces, lives in andrea.train.hydra_internals
(`submit`; tests/train/test_hydra_internals.py and the slow test
tests/cli/test_train.py::test_local_launcher_keeps_a_row_for_a_killed_job fail if they
move). Hydra takes launchers only from the `hydra_plugins`
namespace, hence this module's place; andrea-train registers it (`register()`), since an
editable install's namespace is not scanned. Without the `sweep` extra it defines nothing.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn, setup_globals
from omegaconf import DictConfig

from andrea.cli.app import RunFailed, SettingError
from andrea.train import slurm, slurm_wait
from andrea.train.hydra_internals import failed_job, submit
from andrea.train.hydra_run import is_rank_zero_process
from andrea.train.run_dir import REQUEUE_WAIT_S, wait_until_free
from andrea.train.sweep import job_failed, job_line, mark_failed, write_summary
from andrea.utils.run_result import RESULT_FILE, RunResult

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # the `sweep` extra is not installed
    LocalLauncher = SlurmLauncher = None

if TYPE_CHECKING:
    import submitit
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher as _Launcher
else:
    _Launcher = object  # a mixin: what it goes in front of, for the type checker only


class JobDied(RuntimeError):
    """A job's process ended without a result."""


class _Settled:
    """A submitit job whose `results()` reports its failure as a FAILED JobReturn instead of raising."""

    def __init__(self, job: submitit.Job[Any], overrides: list[str], run_dir: Path) -> None:
        self.job, self.overrides, self.run_dir = job, overrides, run_dir

    def results(self, deadline: float | None = None) -> list[JobReturn]:
        try:
            returns = self.job.results()
        except Exception:  # submitit's UncompletedJobError / FailedJobError: no result came back
            # submitit's local controller discards its tasks' exit codes: the code is unknown here
            return self.died(f"its process ended without a result ({self.state()})", "")
        result = self.run_dir / RESULT_FILE  # the job printed its line into its own log: the console gets it here
        if result.exists():
            summary = RunResult.read(result)
            if summary.status == "completed":
                print(job_line(summary, self.run_dir.name), flush=True)
        return returns

    def state(self) -> str:
        return str(self.job.state)

    def died(self, what: str, exit_code: int | None | str, replaced: RunResult | None = None) -> list[JobReturn]:
        """The job's `killed` row, unless it reported its own end (failed or interrupted) and that is not the
        `replaced` report (whose attempts the row keeps); a job ended before it started (cancelled while pending)
        says so, and names no log: it wrote none."""
        log = Path(self.job.paths.stderr)
        error = JobDied(f"{what}; its log: {log}" if log.exists() else f"{what}; it never started (it wrote no log)")
        if replaced is not None or not (self.run_dir / RESULT_FILE).exists():
            attempts = replaced.attempts if replaced is not None else []  # the run's record so far
            job_failed(
                self.run_dir, self.overrides, error, exit_code, status="killed", log=str(log) if log.exists() else "",
                attempts=attempts,
            )  # fmt: skip
        mark_failed(error, self.run_dir.parent)
        return [failed_job(self.overrides, error)]  # Hydra's sweeper raises it after the batch


class _SettledBySlurm(_Settled):
    """A SLURM job, whose end is the scheduler's word when it left no result (cancelled, out of time)."""

    def state(self) -> str:  # submitit asks sacct, which a cluster without accounting does not answer
        end = slurm.job_end(str(self.job.job_id))
        return "running" if end is None else str(end)

    def results(self, deadline: float | None = None) -> list[JobReturn]:
        end = slurm_wait.wait_for(self.job, deadline)
        if end is None:
            return super().results()
        own = RunResult.read(self.run_dir / RESULT_FILE) if (self.run_dir / RESULT_FILE).exists() else None
        saved = f" after saving {own.checkpoint} at step {own.global_step}" if own and own.checkpoint else ""
        what = f"the scheduler ended job {self.job.job_id}: {end}{saved}"
        code = "" if end.exit_code is None else end.exit_code  # blank: unknown
        return self.died(what, code, replaced=own if own is not None and own.status == "interrupted" else None)


class _KeepEveryJob(_Launcher):
    config: DictConfig | None  # the submitit launcher's, set by its setup()
    settled = _Settled

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None  # setup() comes first
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        jobs = submit(self, job_overrides, initial_job_idx)
        numbers = range(initial_job_idx, initial_job_idx + len(jobs))
        jobs_and_dirs = zip(jobs, job_overrides, numbers, strict=True)
        settled = [self.settled(job, list(o), sweep_dir / str(n)) for job, o, n in jobs_and_dirs]
        limit_min = self.params.get("wait_limit_min")
        deadline = None if limit_min is None else time.monotonic() + 60 * float(limit_min)
        returns = []
        for k, job in enumerate(settled):
            try:
                returns.append(job.results(deadline)[0])
            except slurm_wait.GaveUp:
                write_summary(sweep_dir)  # the rows of the jobs that ended
                left = [str(unsettled.job.job_id) for unsettled in settled[k:]]
                raise RunFailed(slurm_wait.unsettled_line(left, limit_min)) from None
        return returns


if LocalLauncher is not None:

    class SubmititLocal(_KeepEveryJob, LocalLauncher):
        """hydra/launcher=local: every job a local process."""

    class SubmititSlurm(_KeepEveryJob, SlurmLauncher):
        """hydra/launcher=slurm: every job a SLURM job (an array task), requeued to resume from its last.ckpt
        when its time limit comes (up to `max_num_timeout` requeues), and resumed from it when SLURM requeues
        it (preemption, `scontrol requeue`)."""

        settled = _SettledBySlurm

        def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
            limit = self.params.get("wait_limit_min")
            if limit is not None and not 0 < limit < float("inf"):
                raise SettingError(
                    f"hydra.launcher.wait_limit_min={limit} is no time to wait: give minutes > 0, or null for no limit"
                )
            problem = slurm.cluster_problem()  # before a job is submitted: one line, not submitit's traceback
            if problem is not None:
                raise SettingError(problem)
            return super().launch(job_overrides, initial_job_idx)

        def __call__(
            self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str, singleton_state: Any
        ) -> JobReturn:  # runs in the job, in each of its tasks
            assert self.config is not None  # set up by Hydra before it was pickled
            setup_globals()  # the `now` resolver of the sweep dir, as the plugin's own __call__ does next
            run_dir = Path(str(self.config.hydra.sweep.dir)) / str(job_num)
            try:
                if slurm.TIME_LIMIT_SIGNAL is not None:  # submitit's handler requeues even a finished job
                    signal.signal(slurm.TIME_LIMIT_SIGNAL, slurm.outside_training(run_dir))
                if slurm.restart_count():  # requeued: the earlier attempt may still be exiting, writing last.ckpt
                    wait_until_free(run_dir, REQUEUE_WAIT_S)
                overrides = slurm.resume_overrides(list(sweep_overrides), run_dir)
                return super().__call__(overrides, job_dir_key, job_num, job_id, singleton_state)
            except SystemExit as stop:  # stopped on a signal (with last.ckpt saved, once training began)
                if self._requeue_after(stop.code):
                    slurm.requeue_this_job()
                raise

        def _requeue_after(self, exit_code: Any) -> bool:
            """Whether a job that exited with `exit_code` asks SLURM to run it again: it stopped on the time
            limit's warning signal, in its first task, with requeues left."""
            warned = slurm.TIME_LIMIT_SIGNAL is not None and exit_code == 128 + slurm.TIME_LIMIT_SIGNAL
            left = slurm.restart_count() < int(self.params.get("max_num_timeout", 0))
            return warned and left and is_rank_zero_process()


def register() -> None:
    """Make these launchers known to Hydra (a no-op without the `sweep` extra)."""
    from hydra.core.plugins import Plugins

    if LocalLauncher is not None:
        for launcher in (SubmititLocal, SubmititSlurm):
            Plugins.instance().register(launcher)
