"""A reproduction's `study`, checked with the run before anything trains: a study it names, with settings of
its fields' types, on a task it reads, and a network whose measurements the study can take after training (asked
of the run's network built on the meta device)."""

from __future__ import annotations

from typing import cast

import torch
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from andrea.models.network import Network, network
from andrea.train.errors import ConfigError
from andrea.train.studies import build as build_study
from andrea.train.studies.base import Study


def check_study(cfg: DictConfig) -> None:
    """A reproduction's `study` names a study, with settings it takes, on a task it reads."""
    settings = OmegaConf.select(cfg, "study")
    if settings is None:
        return
    try:
        study = build_study(cast(dict, OmegaConf.to_container(settings, resolve=True)))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    task = getattr(get_class(cfg.data._target_), "name", None)
    if study.tasks and task not in study.tasks:
        raise ConfigError(f"study.name={study.name} reads the {' or '.join(study.tasks)} task; drop data={task}")
    if type(study).refuses is not Study.refuses:  # what it measures after training, asked of the network now
        problem = study.refuses(_meta_network(cfg))
        if problem:
            raise ConfigError(f"study.name={study.name}: {problem}; change the run, or run it without the study")


def _meta_network(cfg: DictConfig) -> Network:
    """The run's network built on the meta device: its layers as training will have them, no memory allocated."""
    from andrea.models.files import schema
    from andrea.models.files.build import build

    config = OmegaConf.to_container(cfg.model.net, resolve=True)
    with torch.device("meta"):
        return network(build(schema.parse(config, "model.net", "model.net", build_backend=False)))
