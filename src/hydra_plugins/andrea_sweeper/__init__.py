"""andrea-train's sweeper: Hydra's basic sweeper, which first checks every job's config as a run checks its own
(andrea.train.sweep_checks), so that a sweep with a job that would be refused launches none. Hydra takes sweepers
only from the `hydra_plugins` namespace, hence this module's place (conf/hydra/sweeper/checked.yaml names it).

It holds a basic sweeper rather than subclassing one: Hydra's plugin scan executes its core plugins' modules
anew, and BasicSweeper's constructor names its class by the module's global (`super(BasicSweeper, self)`), so a
subclass defined before the scan would no longer be one of it."""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig


class CheckedSweeper(Sweeper):
    def __init__(
        self, max_batch_size: int | None = None, params: dict[str, str] | None = None, dry_run: bool = False
    ) -> None:
        """dry_run: print each job's plan (andrea.train.plan) instead of launching any (andrea-train --dry-run)."""
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the class as Hydra's scan left it

        self.basic = BasicSweeper(max_batch_size, params)
        self.config: DictConfig | None = None
        self.dry_run = dry_run

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config = config
        self.basic.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        from andrea.train.sweep_checks import check_sweep, compose_job, sweep_points

        assert self.config is not None  # setup() comes first
        points = sweep_points([*self.basic._parse_config(), *arguments])
        check_sweep(self.config, points, here=not self.dry_run)
        if self.dry_run:
            from andrea.train.plan import plan_sweep, table

            print(table(plan_sweep(points, compose_job(self.config))))
            return []
        return self.basic.sweep(arguments)


def register() -> None:
    """Make the sweeper known to Hydra: an editable install's part of the namespace is not scanned."""
    from hydra.core.plugins import Plugins

    Plugins.instance().register(CheckedSweeper)
