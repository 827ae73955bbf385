"""The example plugin (examples/plugin), installed as a user would, passes the conformance kit,
trains from `attention=` / `mask=`, and shows in --help, with no edit to andrea."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """The plugin installed into a folder of its own, on PYTHONPATH (its entry points come with it)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         str(ROOT / "examples" / "plugin")],
        check=True, timeout=300,
    )  # fmt: skip
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}


def run(args, env, cwd, timeout=600):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow(reason="installs the plugin, then the kit's cells for it and a training run (~2 min)")
def test_the_plugin_passes_the_kit_and_trains(plugin_env, tmp_path):
    kit = run([sys.executable, "-m", "pytest", "--pyargs", "andrea.testing", "-q", "-p", "no:cacheprovider",
               "-k", "einsum or strided"], plugin_env, tmp_path)  # fmt: skip
    assert kit.returncode == 0, kit.stdout[-3000:]
    passed = int(kit.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed > 300  # every einsum cell and every strided one
    assert "einsum" in kit.stdout and "strided_3" in kit.stdout  # in the parity matrix report

    train = str(Path(sys.executable).with_name("andrea-train"))
    help_text = run([train, "--help"], plugin_env, tmp_path).stdout
    (attention_line,) = [line for line in help_text.splitlines() if line.startswith("attention: ")]
    assert {"eager", "einsum", "flex", "naive", "sdpa"} <= set(attention_line[len("attention: ") :].split(", "))
    assert "strided" in help_text
    done = run([train, "attention=einsum", "mask=strided", "mask.stride=3", "logger=csv", "trainer.max_epochs=1",
                "data.num_train=256", "data.num_val=64"], plugin_env, tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = tmp_path.glob("logs/train/runs/*")
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert "backend: einsum" in config and "name: strided" in config
    sample = str(Path(sys.executable).with_name("andrea-sample"))
    text = run([sample, f"ckpt_path={run_dir}/checkpoints/last.ckpt", "prompt=3 5", "max_new_tokens=2"],
               plugin_env, tmp_path)  # fmt: skip
    assert text.returncode == 0, text.stderr  # a saved model names the plugin's mask: read through its entry point
