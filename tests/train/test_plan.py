"""andrea-train --dry-run: every job of a sweep planned (its steps, tokens, FLOPs and H100 minutes) with nothing
trained and nothing written; a GPU recipe refused on a machine without a GPU unless planned; and every GPU recipe's
plan (slow: each job's parts are built)."""

from __future__ import annotations

import itertools
import re

import pytest
from omegaconf import OmegaConf

from andrea.train.errors import ConfigError
from andrea.train.experiments import summaries
from andrea.train.plan import H100_BF16_FLOPS, STEP_FLOOR_S, UTILISATION, JobPlan, _steps
from tests.cli.test_train import run

ROW = re.compile(r"^\s*(\d+)\s+([\d,]+)\s+(\S+ GiB!?|\?)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+(.*)$")


def plan_rows(stdout: str) -> list[re.Match[str]]:
    return [match for line in stdout.splitlines() if (match := ROW.match(line))]


def test_a_job_takes_the_fewer_of_its_max_steps_and_its_epochs_batches():
    cfg = OmegaConf.create({"trainer": {"max_steps": 100, "max_epochs": 3}})
    assert _steps(cfg, 20) == 60
    cfg.trainer.max_epochs = -1
    assert _steps(cfg, 20) == 100
    cfg.trainer.update({"max_steps": -1, "max_epochs": 4, "limit_train_batches": 0.5})
    assert _steps(cfg, 20) == 40
    assert _steps(cfg, 20, accumulate=3) == 4 * 4  # 10 batches an epoch, a step every 3 (the last of one)
    cfg.trainer.max_epochs = -1
    with pytest.raises(ConfigError, match="set trainer.max_steps"):
        _steps(cfg, 20)
    cfg.trainer.max_epochs = None  # Lightning's default where neither is given: 1,000 epochs
    assert _steps(cfg, 20) == 1_000 * 10


def test_a_small_model_is_planned_at_the_step_floor_and_a_large_one_by_its_flops():
    small = JobPlan("small", 10_000, None, steps=1_000, tokens=64_000, flops=1e12)
    assert small.h100_minutes == pytest.approx(1_000 * STEP_FLOOR_S / 60)
    large = JobPlan("large", 10**8, None, steps=1_000, tokens=10**8, flops=6e18)
    assert large.h100_minutes == pytest.approx(6e18 / (H100_BF16_FLOPS * UTILISATION) / 60)


def test_dry_run_plans_every_job_of_a_sweep_and_writes_nothing(tmp_path):
    args = ["model.net.d_model=16,32", "trainer.max_epochs=3", f"hydra.sweep.dir={tmp_path / 'sweep'}", "--dry-run"]
    result = run(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = plan_rows(result.stdout)
    assert [row[8].split()[0] for row in rows] == ["model.net.d_model=16", "model.net.d_model=32"]
    small, wide = (int(row[2].replace(",", "")) for row in rows)
    assert wide > small  # each job's own network, built
    steps = {int(row[4].replace(",", "")) for row in rows}
    assert len(steps) == 1 and steps.pop() % 3 == 0  # 3 epochs of the data's batches
    assert "2 jobs" in result.stdout and "min on one H100" in result.stdout
    assert list(tmp_path.iterdir()) == []  # no sweep dir, no outputs: nothing trained, nothing written


def test_dry_run_into_a_sweep_dir_that_holds_jobs_leaves_it_as_it_was(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "summary.md").write_text("an earlier command's summary\n")
    result = run(["model.net.d_model=16,32", f"hydra.sweep.dir={sweep}", "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "summary.md"]
    assert (sweep / "summary.md").read_text() == "an earlier command's summary\n"


def test_dry_run_refuses_a_sweeper_that_draws_its_points_as_it_goes(tmp_path):
    result = run(["hparams_search=optuna", "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and "drop hparams_search=" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_recipe_on_a_machine_without_one_is_refused_unless_planned(tmp_path):
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}  # this test's machine has no GPU, whatever the suite's has
    refused = run(["experiment=gpu/grokking", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=no_gpu)
    assert refused.returncode == 2 and "torch sees no GPU here" in refused.stderr
    planned = run(["experiment=gpu/grokking", "--dry-run"], cwd=tmp_path, env=no_gpu)
    assert planned.returncode == 0, planned.stderr
    (row,) = plan_rows(planned.stdout)
    assert int(row[4].replace(",", "")) == 40_000  # Nanda et al.'s steps, one an epoch


RECIPES = sorted(name for name in summaries() if name.startswith("gpu/"))


def sweep_size(name: str) -> int:
    """The jobs a recipe's sweep launches: every combination of its hydra.sweeper.params."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("andrea.conf", version_base="1.3"):
        cfg = compose("train", [f"experiment={name}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params or {}
    return len(list(itertools.product(*(str(values).split(",") for values in params.values()))))


@pytest.mark.slow
@pytest.mark.parametrize("name", RECIPES)
def test_every_gpu_recipe_plans_its_jobs_and_their_h100_minutes(name, tmp_path):
    assert len(RECIPES) == 7  # one a reproduction
    result = run([f"experiment={name}", "--dry-run"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = plan_rows(result.stdout)
    assert len(rows) == sweep_size(name)
    assert all(float(row[7]) > 0 and int(row[4].replace(",", "")) > 0 for row in rows)
    total = re.search(r"about (\d+) min on one H100", result.stdout)
    assert total and int(total[1]) >= 1
    assert f"about {total[1]} H100 min" in summaries()[name]  # the recipe's summary line gives its plan's minutes
    assert list(tmp_path.iterdir()) == []
