"""Compose the training config as andrea-train would, with the run dir in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

CONF = Path(__file__).resolve().parents[2] / "conf"

# Small and quick: a few hundred rows, one epoch, no logger unless a test asks for one.
QUICK = ["data.num_train=256", "data.num_val=64", "trainer.max_epochs=1", "logger=none"]


def compose_train(run_dir: Path | str, overrides=()) -> DictConfig:
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # what ${hydra:...} and the run-name resolvers read
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.paths.log_dir = str(run_dir)
        del cfg["hydra"]  # a task function never sees the hydra node
    return cfg


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """Each test composes its own config; none inherits the previous test's Hydra state."""
    yield
    HydraConfig.instance().cfg = None


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """The default andrea-train run (repetition task, 3 epochs, wandb offline), run once."""
    from andrea.pipeline import train

    run_dir = tmp_path_factory.mktemp("default_run")
    result = train(compose_train(run_dir))
    return result, run_dir


@pytest.fixture(scope="session")
def induction_run(tmp_path_factory):
    """experiment=induction on eager (two layers: a previous-token head, then induction heads), run once."""
    from andrea.pipeline import train

    run_dir = tmp_path_factory.mktemp("induction_run")
    result = train(compose_train(run_dir, ["experiment=induction", "attention=eager", "logger=none"]))
    HydraConfig.instance().cfg = None
    return result, run_dir
