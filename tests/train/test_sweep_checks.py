"""A sweep is checked whole before any job launches: a job that would be refused refuses the sweep in one line
naming the job, and report.best_over must name keys the sweep varies."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from andrea.train.errors import ConfigError
from andrea.train.sweep_checks import check_sweep, sweep_points


def checked(arguments: list[str]) -> None:
    """check_sweep as the sweeper calls it, on the sweep config andrea-train composes for these arguments."""
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        fixed = [a for a in arguments if "," not in a.split("=", 1)[1] or a.split("=", 1)[1].startswith("[")]
        config = compose("train", overrides=fixed, return_hydra_config=True)  # the sweep's own, values aside
        params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
        check_sweep(config, sweep_points([*params, *arguments]))


def test_the_points_are_every_combination_of_the_values_given():
    assert sweep_points(["heads=mha,gqa", "seed=0,1", "trainer.max_epochs=1"]) == [
        ["heads=mha", "seed=0", "trainer.max_epochs=1"],
        ["heads=mha", "seed=1", "trainer.max_epochs=1"],
        ["heads=gqa", "seed=0", "trainer.max_epochs=1"],
        ["heads=gqa", "seed=1", "trainer.max_epochs=1"],
    ]


def test_a_sweep_with_a_refused_job_is_refused_naming_it():
    """experiment=diff_noise attention=sdpa: the differential jobs used to be refused after the softmax ones trained."""
    with pytest.raises(ConfigError) as refused:
        checked(["experiment=diff_noise", "attention=sdpa"])
    assert str(refused.value).startswith(
        "job 9 (arm/diff_noise=diff seed=0 model.optimizer.lr=0.001 experiment=diff_noise attention=sdpa) is refused, "
        "so the sweep launched no "
        "job: attention=sdpa: attention backend 'sdpa' does not run mechanism 'diff'"
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["model.optimizer.lr=0.001,0.01", "report.best_over=[seed]"],
         "report.best_over names seed, which this sweep does not vary (it varies model.optimizer.lr); sweep seed, or "
         "drop it from report.best_over"),
        (["seed=0,1", "report.best_over=[model.optimizr.lr]"],
         "report.best_over names model.optimizr.lr, which this sweep does not vary (it varies seed)"),
    ],
)  # fmt: skip
def test_best_over_names_a_key_the_sweep_varies(arguments, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        checked(arguments)


def test_a_valid_sweep_passes_its_checks():
    checked(["heads=mha,gqa", "model.optimizer.lr=0.001,0.01", "report.best_over=[model.optimizer.lr]"])
