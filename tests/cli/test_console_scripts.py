"""Every console script the README and docs show, run as a user runs it: the installed script, from another
folder, in a plain environment (no variable the suite sets for itself: no TRITON_INTERPRET, no WANDB_*,
a fresh HOME), with their arguments, shortened only through documented overrides."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.compose import plain_env

BIN = Path(sys.executable).parent


def run(script: str, *args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [str(BIN / script), *args], cwd=cwd, env=plain_env(home), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.slow  # reason: an andrea-demo process timing every backend
def test_andrea_demo_shows_every_backend_that_runs_here_and_names_the_others(tmp_path):
    done = run("andrea-demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for backend in ("naive", "eager", "sdpa"):
        assert f"│ {backend} " in done.stdout
    assert "not run here: triton: attention backend 'triton' runs on CUDA GPUs" in " ".join(done.stdout.split())
    (folder,) = tmp_path.glob("logs/demo/*")  # a dated folder of its own under the run root, named on the console
    assert {path.name for path in folder.glob("*.png")} == {"mask.png", "attention_heads.png"}
    assert f"wroteinto{folder}:" in "".join(done.stdout.split())  # however the console wraps it
    assert "flex: its first call traces and compiles its kernel" in done.stdout  # the long first call announced


@pytest.mark.slow  # reason: an andrea-show-mask process (4 s)
def test_andrea_show_mask_as_the_readme_shows_it(tmp_path):
    expression = "prefix_lm(prefix_len=4) & sliding_window(window=3, causal=False)"
    done = run("andrea-show-mask", expression, "--length", "10", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = done.stdout.splitlines()[1:11]
    assert rows[2] == "■■■■······"  # inside the prefix a query looks ahead, within the window
    assert rows[6] == "····■■■···"  # after it: the causal window of 3
    assert (tmp_path / "prefix_lm_4_sliding_window_3_bidirectional.png").exists()  # a plain file name


@pytest.mark.slow(reason="trains, then runs export, sample and inspect on the checkpoint (~1 min)")
def test_train_then_export_sample_and_inspect_as_the_readme_shows_them(tmp_path):
    train = run("andrea-train", "trainer.max_epochs=1", "data.num_train=256", "data.num_val=64", cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    (run_dir,) = tmp_path.glob("logs/train/runs/*")
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    assert ckpt.exists() and list(run_dir.glob("wandb/offline-run-*"))  # the default logger: wandb, offline

    export = run("andrea-export", str(ckpt), "toy.safetensors", cwd=tmp_path)
    assert export.returncode == 0, export.stderr[-2000:]
    assert (tmp_path / "toy.safetensors").stat().st_size > 0

    for args in (
        [f"ckpt_path={ckpt}", "prompt=3 5 9"],
        ["ckpt_path=toy.safetensors", "temperature=0", "max_new_tokens=5", "prompt=3 5 9"],
        [f"ckpt_path={ckpt}", "top_k=null", "top_p=0.9", "seed=7", "num_samples=3", "prompt=1 2", "max_new_tokens=4"],
        [f"ckpt_path={ckpt}", "cache=false", "prompt=1 2", "max_new_tokens=4"],
    ):
        sample = run("andrea-sample", *args, cwd=tmp_path)
        assert sample.returncode == 0, (args, sample.stderr[-2000:])
        assert sample.stdout.strip(), args

    for args in ([str(ckpt)], ["toy.safetensors", "3 1 4 1"], [str(ckpt), "ablate=[L0H1]", "ablation=mean"]):
        inspect = run("andrea-inspect", *args, cwd=tmp_path)
        assert inspect.returncode == 0, (args, inspect.stderr[-2000:])


@pytest.mark.slow  # reason: six processes, each loading its tool (about 3 s each)
@pytest.mark.parametrize(
    "script", ["andrea-demo", "andrea-show-mask", "andrea-sample", "andrea-eval", "andrea-inspect", "andrea-export"]
)
def test_each_command_s_help_says_what_it_does_with_an_example(script, tmp_path):
    done = run(script, "--help", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{script}: " in done.stdout  # its name, then what it does
    examples = done.stdout.split("xample")[-1]
    assert f"{script} " in examples  # and a command line to copy
    assert "== Configuration groups ==" not in done.stdout  # not andrea-train's groups
