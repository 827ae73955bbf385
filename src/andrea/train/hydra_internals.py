"""Every use andrea makes of Hydra's (and its submitit launcher's) private or undocumented API, in one place.

Checked against the versions in CHECKED_WITH (tests/train/test_hydra_internals.py fails loudly when an
upgrade moves any of them). Nothing else in andrea reaches past Hydra's public API.

    job_error(job_return)                 the exception a FAILED job raised (Hydra keeps it in a private field)
    failed_job(overrides, error)          a FAILED JobReturn carrying `error`, as Hydra's own are
    quiet(job_return)                     a FAILED JobReturn raising its error without Hydra's "Error executing
                                          job" line (andrea's one line about the sweep says it)
    submit(launcher, overrides, idx)      the submitit launcher's submission, its jobs returned unread
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

log = logging.getLogger("hydra_plugins.hydra_submitit_launcher.submitit_launcher")  # the plugin's lines, as its own

ANDREA_KEYS = ("wait_limit_min",)  # hydra/launcher=slurm's own settings, not submitit's: never handed to it
CHECKED_WITH = {"hydra-core": "1.3.8", "hydra-submitit-launcher": "1.2.0", "submitit": "1.5.4"}


def job_error(job_return: JobReturn) -> Any:
    """The exception a FAILED job raised (`return_value` re-raises it instead of returning it)."""
    return job_return._return_value


def failed_job(overrides: list[str], error: BaseException) -> JobReturn:
    """A FAILED JobReturn whose error Hydra's sweeper raises after the batch, as for a job that raised."""
    ret = _QuietJobReturn(overrides=overrides, status=JobStatus.FAILED)
    ret._return_value = error
    return ret


class _QuietJobReturn(JobReturn):
    """A JobReturn whose `return_value` raises a failed job's error without first writing Hydra's "Error
    executing job with overrides" to stderr (JobReturn's own getter does, ahead of andrea's line)."""

    @property
    def return_value(self) -> Any:
        if self.status == JobStatus.COMPLETED:
            return self._return_value
        raise self._return_value

    @return_value.setter
    def return_value(self, value: Any) -> None:
        self._return_value = value


def quiet(job_return: JobReturn) -> None:
    """`job_return` (Hydra's own, handed to a callback's on_job_end) as a _QuietJobReturn from now on."""
    job_return.__class__ = _QuietJobReturn


def submit(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Submit a sweep's jobs as hydra-submitit-launcher's `BaseSubmititLauncher.launch` does, and return the
    submitit jobs instead of reading their results in one list (where the first dead job raises and the
    others go unread). `launcher` is one of the plugin's launchers, set up by Hydra; this is its `launch`
    up to `executor.map_array`, built from the same pieces: its `params`, `_EXECUTOR` and `BaseQueueConf`."""
    import submitit
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    init_keys = {"max_num_timeout", "submitit_folder", *ANDREA_KEYS}
    executor = submitit.AutoExecutor(
        cluster=launcher._EXECUTOR,
        folder=launcher.params["submitit_folder"],
        **{f"{launcher._EXECUTOR}_{k}": v for k, v in launcher.params.items() if k == "max_num_timeout"},
    )
    queue_keys = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(
        **{
            k if k in queue_keys else f"{launcher._EXECUTOR}_{k}": v
            for k, v in launcher.params.items()
            if k not in init_keys
        }  # fmt: skip
    )
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if "mode" in launcher.config.hydra.sweep:
        os.chmod(sweep_dir, mode=int(str(launcher.config.hydra.sweep.mode), 8))
    numbers = range(initial_job_idx, initial_job_idx + len(job_overrides))
    for number, overrides in zip(numbers, job_overrides, strict=True):
        log.info(f"\t#{number} : {' '.join(filter_overrides(overrides))}")
    state = Singleton.get_state()
    params = [
        (list(o), "hydra.sweep.dir", n, f"job_id_for_{n}", state) for o, n in zip(job_overrides, numbers, strict=True)
    ]
    return list(executor.map_array(launcher, *zip(*params, strict=True)))
