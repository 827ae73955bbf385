"""A sweep checked once, before any of its jobs launches (hydra_plugins.andrea_sweeper.CheckedSweeper, andrea-train's
sweeper: Hydra's basic sweeper, which knows its points before it launches them).

    every job    each job's config composed from the sweep's points and checked as a run checks its own
                 (andrea.train.checks): a sweep in which a job would be refused is refused whole, in one line
                 naming that job, instead of after the jobs before it have trained (experiment=diff_noise
                 attention=sdpa: the differential jobs, refused once the softmax ones had trained)
    the report   report.best_over names keys the sweep varies: a key it does not vary would leave every point
                 its one run, and the report would read as if a best had been picked

A sweeper that draws its points as it goes (Optuna's) has each job checked as it starts, as a run is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from andrea.train.errors import ConfigError


def check_sweep(config: DictConfig, points: list[list[str]], here: bool = True) -> None:
    """Refuse the sweep of `config` (Hydra's) over `points` with a one-line ConfigError before any job runs;
    `here=False`: a sweep planned for another machine (andrea.train.checks.check_config)."""
    from andrea.train.checks import check_config

    _check_best_over(config, points)
    for number, overrides in enumerate(points):
        job = compose_job(config)(list(overrides))
        try:
            check_config(job, here)
        except ConfigError as err:
            label = " ".join(overrides) or "defaults"
            raise ConfigError(f"job {number} ({label}) is refused, so the sweep launched no job: {err}") from None


def compose_job(config: DictConfig) -> Callable[[list[str]], DictConfig]:
    """A job's config from its overrides, as the sweep's launcher composes it."""
    return lambda overrides: compose(config_name=config.hydra.job.config_name, overrides=overrides)


def sweep_points(arguments: list[str]) -> list[list[str]]:
    """Each job's overrides, as the basic sweeper launches them: every combination of the values given."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the class as Hydra's plugin scan left it

    overrides = OverridesParser.create().parse_overrides(arguments)
    return [list(point) for batch in BasicSweeper.split_arguments(overrides, None) for point in batch]


def _check_best_over(config: DictConfig, points: Sequence[Sequence[str]]) -> None:
    keys = OmegaConf.select(config, "report.best_over") or []
    varied = sorted(key for key, seen in _values(points).items() if len(seen) > 1)
    for key in keys:
        if key not in varied:
            raise ConfigError(
                f"report.best_over names {key}, which this sweep does not vary (it varies "
                f"{', '.join(varied) or 'nothing'}); sweep {key}, or drop it from report.best_over"
            )


def _values(points: Sequence[Sequence[str]]) -> dict[str, set[str]]:
    """Each key the points set, with the values they give it."""
    values: dict[str, set[str]] = {}
    for override in (o for point in points for o in point if "=" in o):
        key, value = override.split("=", 1)
        values.setdefault(key.lstrip("+~"), set()).add(value)
    return values
