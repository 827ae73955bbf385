"""A killed run loses nothing: SIGKILL mid-run, resume from last.ckpt in the same run dir and
wandb run, and the per-step losses continue exactly as an unbroken run's; SIGTERM saves first."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.train.wandb_reader import records

TRAIN = [sys.executable, "-m", "andrea.cli.train"]
RUN = ["logger=many_loggers", "trainer.max_epochs=3", "callbacks.last_checkpoint.every_n_train_steps=10", "seed=7",
       "trainer.log_every_n_steps=1"]  # fmt: skip


def own_env() -> dict[str, str]:
    """The environment without WANDB_SERVICE: an in-process wandb run earlier in the suite sets it, and a
    child would then share this process's wandb service, which keeps a SIGKILLed child's run ID "in use"
    for a while. From a user's shell each run starts a service of its own."""
    return {key: value for key, value in os.environ.items() if key != "WANDB_SERVICE"}


def start(run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*TRAIN, *RUN, f"hydra.run.dir={run_dir}", *extra], cwd=run_dir.parent,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=own_env(),
    )  # fmt: skip


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run ended before {path.name} appeared: {process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"no {path} after {timeout} s"
        time.sleep(0.01)


def interrupt(run_dir: Path, signum: int) -> tuple[int, str]:
    """Start a run, send it `signum` once its first last.ckpt exists; its exit code and stderr."""
    process = start(run_dir)
    wait_for(run_dir / "checkpoints" / "last.ckpt", process)
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def losses(run_dir: Path, version: int) -> dict[int, str]:
    """step -> train/loss_step as logged (the exact decimal string Lightning wrote)."""
    with open(run_dir / "csv" / f"version_{version}" / "metrics.csv") as f:
        return {int(r["step"]): r["train/loss_step"] for r in csv.DictReader(f) if r.get("train/loss_step")}


def resume(run_dir: Path, args: list[str]) -> dict[int, str]:
    """Run andrea-train with `args` to the end; the losses its attempt logged (the run's second)."""
    done = subprocess.run(
        [*TRAIN, *args], cwd=run_dir.parent, capture_output=True, text=True, timeout=300, env=own_env()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "not resumable" not in done.stderr + done.stdout
    )  # andrea's resume is exact: Lightning's warning is not shown
    return losses(run_dir, 1)  # the resumed attempt logs beside, never over, the first one


def wandb_ids(run_dir: Path) -> set[str]:
    ids = set()
    for run_file in (run_dir / "wandb").glob("offline-run-*/run-*.wandb"):
        ids |= {r.run.run_id for r in records(run_file) if r.WhichOneof("record_type") == "run"}
    return ids


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> dict[int, str]:
    run_dir = tmp_path_factory.mktemp("unbroken") / "run"
    done = start(run_dir)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err[-2000:]
    return losses(run_dir, 0)


@pytest.mark.slow(reason="three andrea-train processes, ~40 s")
def test_sigkill_then_resume_continues_the_same_curve(unbroken, tmp_path):
    run_dir = tmp_path / "run"
    interrupt(run_dir, signal.SIGKILL)
    resumed_from = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 0 < resumed_from < max(unbroken)
    after = resume(run_dir, [*RUN, f"hydra.run.dir={run_dir}", f"ckpt_path={run_dir}/checkpoints/last.ckpt"])
    assert min(after) == resumed_from and max(after) == max(unbroken)
    assert after == {step: loss for step, loss in unbroken.items() if step >= resumed_from}  # bitwise: same strings
    assert len(wandb_ids(run_dir)) == 1  # both attempts wrote to the same wandb run
    whole = json.loads((run_dir / "result.json").read_text())
    assert [(a["start_step"], a["ended"]) for a in whole["attempts"]] == [(0, "unknown"), (resumed_from, "finished")]
    assert [step for step, _ in whole["curves"]["train"]] == [step + 1 for step in sorted(unbroken)]  # each once
    first, second = (run_dir / ".hydra" / "overrides.yaml", run_dir / ".hydra" / "attempt-2" / "overrides.yaml")
    assert "ckpt_path" not in first.read_text() and "ckpt_path" in second.read_text()  # each attempt's config kept
    assert not list((run_dir / "checkpoints").glob(".*.partial"))


@pytest.mark.slow(reason="two andrea-train processes, ~30 s")
def test_sigterm_saves_prints_the_resume_command_and_exits_143(unbroken, tmp_path):
    run_dir = tmp_path / "run"
    returncode, err = interrupt(run_dir, signal.SIGTERM)
    assert returncode == 128 + signal.SIGTERM, err[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "interrupted" and "Traceback" not in err
    with open(run_dir / "csv" / "version_0" / "metrics.csv") as f:
        assert not [r for r in csv.DictReader(f) if r.get("val/loss")]  # no validation pass on the way out...
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["last.ckpt"]  # ...and no new "best"
    assert f"resume with: {result['resume']}" in " ".join(err.split())
    after = resume(run_dir, result["resume"].split()[1:])  # andrea-train <overrides> hydra.run.dir=... ckpt_path=...
    assert min(after) == result["global_step"]
    assert after == {step: loss for step, loss in unbroken.items() if step >= result["global_step"]}
    whole = json.loads((run_dir / "result.json").read_text())  # the run's record: both attempts, joined
    assert [(a["start_step"], a["last_step"], a["ended"]) for a in whole["attempts"]] == [
        (0, result["global_step"], "cancelled"), (result["global_step"], max(unbroken) + 1, "finished")
    ]  # fmt: skip
    assert [step for step, _ in whole["curves"]["train"]] == [step + 1 for step in sorted(unbroken)]
    assert whole["wall_s"] >= sum(a["wall_s"] for a in whole["attempts"]) - 0.5


def files(folder: Path) -> dict[Path, bytes | str]:
    """Every entry under `folder`: a file as its bytes, a link as where it points (wandb links its logs)."""
    entries = sorted(folder.rglob("*"))
    return {p.relative_to(folder): str(p.readlink()) if p.is_symlink() else p.read_bytes() if p.is_file() else ""
            for p in entries}  # fmt: skip


def default_run_copy(default_run, tmp_path: Path, first_attempt: bool = False) -> Path:
    """A copy of the default run's dir; `first_attempt`: with the config and log andrea-train's first attempt
    leaves (the default run was trained from Python, without either)."""
    import shutil

    from andrea.train.hydra_run import HYDRA_FILES

    run_dir = tmp_path / "run"
    shutil.copytree(default_run[1], run_dir, symlinks=True)
    if first_attempt:
        (run_dir / ".hydra").mkdir()
        for name in HYDRA_FILES:
            (run_dir / ".hydra" / name).write_text(f"# the first attempt's {name}\n")
        (run_dir / "train.log").write_text("the first attempt's log\n")
    return run_dir


def resumed(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """andrea-train resuming `run_dir` from its last.ckpt, with `overrides`."""
    train = str(Path(sys.executable).with_name("andrea-train"))
    return subprocess.run(
        [train, f"hydra.run.dir={run_dir}", f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}", *overrides],
        capture_output=True, text=True, env=own_env(), cwd=run_dir.parent, timeout=300,
    )  # fmt: skip


@pytest.mark.slow(reason="an andrea-train process (10 s)")
def test_resuming_a_finished_run_says_so_and_leaves_every_file_as_it_was(default_run, tmp_path):
    """The default run resumed with the settings it finished with: one line, exit 0, and every file of the run
    dir byte for byte as it was (no result.json rewritten, no config, log, lock or logger file added)."""
    run_dir = default_run_copy(default_run, tmp_path)
    before = files(run_dir)
    done = resumed(run_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines() == [
        f"andrea-train: ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'} already holds the whole run (epoch 3 of "
        "trainer.max_epochs=3 (step 192)): nothing left to train, every file of the run left as it was; raise "
        "trainer.max_steps or trainer.max_epochs to train on"
    ]
    assert files(run_dir) == before


@pytest.mark.parametrize(
    "first_attempt",
    [
        pytest.param(first, marks=pytest.mark.slow(reason="an andrea-train process (10-15 s)"))
        for first in (True, False)
    ],
    ids=["after-andrea-train", "after-python"],
)
def test_a_refused_resume_writes_nothing_into_the_run_dir(default_run, tmp_path, first_attempt):
    """A resume the checkpoint refuses (another model size): one line, exit 2, and the run dir byte for byte as it
    was: no .hydra/attempt-<n>, no config of Hydra's where the run had none, no log."""
    run_dir = default_run_copy(default_run, tmp_path, first_attempt)
    before = files(run_dir)
    done = resumed(run_dir, "model.net.d_model=64")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"andrea-train: error: ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'} holds a model with "
        "model.net.d_model=32, this run builds model.net.d_model=64; resume with the overrides the run was started "
        "with"
    ]
    assert files(run_dir) == before


@pytest.mark.slow(reason="two andrea-train processes, one training an epoch (~50 s)")
def test_a_resume_s_config_is_written_once_the_run_is_accepted_and_the_run_dir_its_own(default_run, tmp_path):
    """A resume into a run dir another andrea-train holds writes no .hydra/attempt-<n>; the next, accepted, writes
    .hydra/attempt-2 as Hydra writes a run's first config, and the first attempt's stays as it was."""
    from omegaconf import OmegaConf

    from andrea.train.hydra_run import HYDRA_FILES
    from andrea.train.run_dir import hold

    run_dir = default_run_copy(default_run, tmp_path, first_attempt=True)
    with hold(run_dir):
        before = files(run_dir)
        done = resumed(run_dir, "trainer.max_epochs=4", "logger=none")
        assert done.returncode == 2 and "is in use by another andrea-train" in done.stderr
        assert files(run_dir) == before
    done = resumed(run_dir, "trainer.max_epochs=4", "logger=none")
    assert done.returncode == 0, done.stderr[-2000:]
    hydra = run_dir / ".hydra"
    assert sorted(p.name for p in hydra.iterdir()) == ["attempt-2", "config.yaml", "hydra.yaml", "overrides.yaml"]
    assert all((hydra / name).read_bytes() == before[Path(".hydra", name)] for name in HYDRA_FILES)
    attempt = hydra / "attempt-2"
    assert OmegaConf.load(attempt / "config.yaml").trainer.max_epochs == 4
    assert OmegaConf.load(attempt / "hydra.yaml").hydra.runtime.output_dir == str(run_dir)
    assert OmegaConf.load(attempt / "overrides.yaml") == [
        f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}",
        "trainer.max_epochs=4",
        "logger=none",
    ]


def test_what_counts_as_nothing_left(default_run, tmp_path):
    """The checkpoint's own counters against the config's end: its steps reach trainer.max_steps, or its epochs
    (the last one finished) trainer.max_epochs; a run asked to go further goes on."""
    from andrea.train.checks_files import check_checkpoint
    from tests.compose import compose_train

    def nothing_left(overrides: list[str]) -> str | None:  # what the checks find, reading the checkpoint once
        return check_checkpoint(compose_train(tmp_path, overrides))

    ckpt = f"ckpt_path={default_run[1] / 'checkpoints' / 'last.ckpt'}"
    steps = nothing_left([ckpt, "trainer.max_steps=192", "trainer.max_epochs=10"])
    assert steps is not None and "(step 192 of trainer.max_steps=192)" in steps
    assert nothing_left([ckpt, "trainer.max_steps=193", "trainer.max_epochs=10"]) is None
    assert nothing_left([ckpt, "trainer.max_epochs=4"]) is None
    assert nothing_left([]) is None  # no checkpoint: a new run
