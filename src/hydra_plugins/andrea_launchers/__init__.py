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

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn
from omegaconf import DictConfig

from andrea.train.hydra_internals import failed_job, submit
from andrea.train.sweep import job_failed, job_line, mark_failed
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

    def results(self) -> list[JobReturn]:
        try:
            returns = self.job.results()
        except Exception:  # submitit's UncompletedJobError / FailedJobError: no result came back
            error = JobDied(f"its process ended without a result ({self.job.state}); its log: {self.job.paths.stderr}")
            if not (self.run_dir / RESULT_FILE).exists():  # the job's own report (failed, interrupted) wins
                # submitit's local controller discards its tasks' exit codes: the code is unknown here
                job_failed(self.run_dir, self.overrides, error, "", status="killed")
            mark_failed(error, self.run_dir.parent)
            return [failed_job(self.overrides, error)]  # Hydra's sweeper raises it after the batch
        result = self.run_dir / RESULT_FILE  # the job printed its line into its own log: the console gets it here
        if result.exists():
            summary = RunResult.read(result)
            if summary.status == "completed":
                print(job_line(summary, self.run_dir.name), flush=True)
        return returns


class _KeepEveryJob(_Launcher):
    config: DictConfig | None  # the submitit launcher's, set by its setup()

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None  # setup() comes first
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        jobs = submit(self, job_overrides, initial_job_idx)
        numbers = range(initial_job_idx, initial_job_idx + len(jobs))
        settled = [
            _Settled(job, list(o), sweep_dir / str(n)) for job, o, n in zip(jobs, job_overrides, numbers, strict=True)
        ]
        return [job.results()[0] for job in settled]


if LocalLauncher is not None:

    class SubmititLocal(_KeepEveryJob, LocalLauncher):
        """hydra/launcher=local: every job a local process."""

    class SubmititSlurm(_KeepEveryJob, SlurmLauncher):
        """hydra/launcher=slurm: every job a SLURM job."""


def register() -> None:
    """Make these launchers known to Hydra (a no-op without the `sweep` extra)."""
    from hydra.core.plugins import Plugins

    if LocalLauncher is not None:
        for launcher in (SubmititLocal, SubmititSlurm):
            Plugins.instance().register(launcher)
