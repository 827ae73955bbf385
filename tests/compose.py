"""Compose the training config as andrea-train would, with the run dir in a temporary folder; and a
user's shell environment for the tests that run andrea's commands."""

from __future__ import annotations

import os
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

CONF = Path(__file__).resolve().parents[1] / "conf"

# Small and quick: a few hundred rows, one epoch (4 steps, each logged), no logger unless a test asks for one.
QUICK = ["data.num_train=256", "data.num_val=64", "trainer.max_epochs=1", "logger=none", "trainer.log_every_n_steps=1"]


def compose_train(run_dir: Path | str, overrides=()) -> DictConfig:
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # what ${hydra:...} and the run-name resolvers read
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.paths.log_dir = str(run_dir)
        del cfg["hydra"]  # a task function never sees the hydra node
    return cfg


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def plain_env(home: Path) -> dict[str, str]:
    """A user's shell: the suite's own variables removed, a HOME of its own (wandb writes its settings there)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("WANDB_", "TRITON_"))}
    return {**env, "HOME": str(home)}
