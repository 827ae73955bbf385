"""Start-up: the training pipeline imports a logger, a launcher, a sweeper or the lens's heavier tools only when a
run uses them (scripts/bench_startup.py measures what the rest costs)."""

import subprocess
import sys

import pytest

ONLY_WHEN_USED = ("wandb", "tensorboard", "optuna", "submitit", "transformer_lens", "andrea.lens.explorer",
                  "andrea.lens.patching", "hydra_plugins.hydra_submitit_launcher")  # fmt: skip


@pytest.mark.slow  # reason: imports Lightning in a fresh interpreter (about 9 s here)
def test_importing_the_pipeline_imports_no_logger_launcher_or_lens_tool():
    code = f"import sys, andrea.train.pipeline; print([m for m in {ONLY_WHEN_USED!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
