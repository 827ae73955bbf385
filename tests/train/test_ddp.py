"""Scale-out on Lightning's own engines: DDP on CPU (2 processes, gloo) trains on the very batches
one process trains on with the same global batch, so the losses agree step by step."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.utils import instantiate

from tests.compose import compose_train

TRAIN = [sys.executable, "-m", "andrea.cli.train"]
COMMON = ["logger=csv", "trainer.max_epochs=2", "data.num_train=512", "data.num_val=64", "seed=3",
          "callbacks.attention_maps.every_n_steps=1000", "trainer.log_every_n_steps=1"]  # fmt: skip
TOLERANCE = 2e-5  # float sums in another order (per-process means, then the all-reduce)


def train(run_dir: Path, *overrides: str) -> tuple[dict[int, float], dict]:
    """The loss the CSV logger got at every step (and the last val loss at -1), and result.json."""
    done = subprocess.run([*TRAIN, *COMMON, *overrides, f"hydra.run.dir={run_dir}"], cwd=run_dir.parent,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with open(run_dir / "csv" / "version_0" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    per_step = {int(r["step"]): float(r["train/loss_step"]) for r in rows if r.get("train/loss_step")}
    per_step[-1] = next(float(r["val/loss"]) for r in reversed(rows) if r.get("val/loss"))
    return per_step, json.loads((run_dir / "result.json").read_text())


@pytest.mark.slow(reason="a single-process and a 2-process DDP run, ~60 s")
def test_ddp_cpu_reaches_the_loss_of_one_process_with_the_same_global_batch(tmp_path):
    one, one_result = train(tmp_path / "one", "data.batch_size=32")
    two, two_result = train(tmp_path / "ddp", "trainer=ddp_cpu", "data.batch_size=16")  # 2 x 16 = 32 per step
    assert one.keys() == two.keys() and len(one) == 2 * 512 // 32 + 1
    worst = max(abs(one[step] - two[step]) / abs(one[step]) for step in one)
    assert worst < TOLERANCE, f"largest relative difference {worst:.2e}"
    assert one[max(one)] < 0.8 * one[0]  # and it did learn
    # the summary and result.json's curves report the global loss too, as the loggers do
    curve_one, curve_two = dict(one_result["curves"]["train"]), dict(two_result["curves"]["train"])
    assert curve_one.keys() == curve_two.keys() and len(curve_one) == 2 * 512 // 32
    assert max(abs(curve_one[s] - curve_two[s]) / abs(curve_one[s]) for s in curve_one) < TOLERANCE
    assert abs(one_result["train_loss"] - two_result["train_loss"]) / one_result["train_loss"] < TOLERANCE


def test_fsdp_wraps_one_block_per_unit(tmp_path):
    cfg = compose_train(tmp_path, ["trainer=fsdp", "model=andrea-tiny"])
    strategy = instantiate(cfg.trainer.strategy)
    from andrea.models.gpt import Block

    assert type(strategy).__name__ == "FSDPStrategy"
    assert strategy.kwargs["auto_wrap_policy"]._module_classes == {Block}


def test_slurm_launcher_config(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional `sweep` extra is not installed")
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", ["hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert (
        launcher._target_ == "hydra_plugins.andrea_launchers.SubmititSlurm"
    )  # the plugin's, keeping a row for a job that dies
    from hydra.utils import get_class
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

    assert issubclass(get_class(launcher._target_), SlurmLauncher)
    assert (launcher.tasks_per_node, launcher.gpus_per_node, launcher.nodes) == (4, 4, 1)
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", ["hydra/launcher=slurm", "trainer=ddp_cpu"], return_hydra_config=True)
    assert (cfg.hydra.launcher.tasks_per_node, cfg.hydra.launcher.gpus_per_node) == (2, None)  # none asked of CPUs
