"""Every use andrea makes of Hydra's (and its submitit launcher's) private or undocumented API, in one place.

Checked against the versions in CHECKED_WITH (tests/train/test_hydra_internals.py fails loudly when an
upgrade moves any of them). Nothing else in andrea reaches past Hydra's public API.

    job_error(job_return)                 the exception a FAILED job raised (Hydra keeps it in a private field)
    failed_job(overrides, error)          a FAILED JobReturn carrying `error`, as Hydra's own are
    each_job_settled(settle)              for a `with` block, every job the submitit launcher submits
                                          goes through `settle` before the launcher reads its results
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

CHECKED_WITH = {"hydra-core": "1.3.8", "hydra-submitit-launcher": "1.2.0", "submitit": "1.5.4"}


def job_error(job_return: JobReturn) -> Any:
    """The exception a FAILED job raised (`return_value` re-raises it instead of returning it)."""
    return job_return._return_value


def failed_job(overrides: list[str], error: BaseException) -> JobReturn:
    """A FAILED JobReturn whose error Hydra's sweeper raises after the batch, as for a job that raised."""
    ret = JobReturn(overrides=overrides, status=JobStatus.FAILED)
    ret._return_value = error
    return ret


# settle(job, overrides, job_number) -> an object whose results() the launcher reads in place of the job's
Settle = Callable[[Any, list[str], int], Any]


@contextmanager
def each_job_settled(settle: Settle) -> Iterator[None]:
    """Within the block, the submitit launcher's jobs pass through `settle` as they are submitted.

    hydra-submitit-launcher's `launch` submits with `executor.map_array(self, overrides, "hydra.sweep.dir",
    numbers, ...)` and then reads `job.results()[0]` of each job in one list comprehension; this wraps
    `submitit.AutoExecutor.map_array` for the block's duration so each returned job is `settle`d first.
    """
    import submitit

    original = submitit.AutoExecutor.map_array

    def map_array(
        executor: submitit.Executor, fn: Callable[..., Any], overrides: Sequence[Sequence[str]], *rest: Any
    ) -> list[Any]:
        jobs = original(executor, fn, overrides, *rest)
        numbers = rest[1]  # the job numbers the plugin passes after "hydra.sweep.dir"
        return [settle(job, list(o), n) for job, o, n in zip(jobs, overrides, numbers, strict=True)]

    submitit.AutoExecutor.map_array = map_array  # type: ignore[method-assign, assignment]  # restored below
    try:
        yield
    finally:
        submitit.AutoExecutor.map_array = original  # type: ignore[method-assign]  # submitit's own again
