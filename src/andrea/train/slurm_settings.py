"""hydra/launcher=slurm's settings: the submitit plugin's (SlurmQueueConf), and andrea's own, typed and checked
by Hydra as the plugin's are. Registered when andrea.train is imported, before any config is composed
(conf/hydra/launcher/slurm.yaml builds on it); nothing without the `sweep` extra."""

from __future__ import annotations

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore

SCHEMA = "andrea_slurm"  # in the group hydra/launcher


def register() -> None:
    try:
        from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    except ImportError:  # the `sweep` extra is not installed: no hydra/launcher=slurm
        return

    @dataclass
    class AndreaSlurmConf(SlurmQueueConf):
        _target_: str = "hydra_plugins.andrea_launchers.SubmititSlurm"  # the plugin's launcher, resuming requeued jobs
        # how long the sweep waits for its jobs before it gives up in one line (they run on); null: no limit
        wait_limit_min: float | None = None

    ConfigStore.instance().store(group="hydra/launcher", name=SCHEMA, node=AndreaSlurmConf, provider="andrea")
