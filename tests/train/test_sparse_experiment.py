"""experiment=sparse as a user runs it, shrunk: four jobs, dense attention and each selection of keys, each scored
on MQAR at its training length and at 1k and 4k tokens (docs/zoo.md has the full run's table)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow  # reason: a sweep of four training runs with 4k-token evaluation sets
def test_the_sparse_experiment_scores_every_selection_at_1k_and_4k(tmp_path):
    from tests.compose import plain_env

    script = str(Path(sys.executable).with_name("andrea-train"))
    sweep = tmp_path / "sweep"
    shrunk = ["data.num_train=128", "trainer.max_epochs=1", "trainer.check_val_every_n_epoch=1",
              "data.eval_sets.at_1k.num_val=4", "data.eval_sets.at_4k.num_val=2"]  # fmt: skip
    done = subprocess.run(
        [script, "experiment=sparse", *shrunk, "logger=none", f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, cwd=tmp_path, env=plain_env(tmp_path), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads((sweep / str(job) / "result.json").read_text()) for job in range(4)]
    assert [r["config"]["selection"]["name"] for r in results] == ["none", "dsa", "moba", "nsa"]
    for result in results:
        assert result["status"] == "completed"
        assert set(result["eval_sets"]) == {"at_1k", "at_4k"}
        assert all(0 <= scores["acc"] <= 1 for scores in result["eval_sets"].values())
