"""One live run per run dir, disk trouble in one line with the last checkpoint kept, and
trainer.max_time honoured inside the first epoch."""

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from andrea.train.lit.resume import AtomicCheckpointIO
from andrea.train.pipeline import train
from andrea.train.run_dir import DiskError, RunDirInUse, hold
from tests.compose import QUICK, compose_train

TRAIN = [str(Path(sys.executable).with_name("andrea-train"))]


@pytest.mark.slow  # reason: two andrea-train processes
def test_a_second_run_in_the_same_dir_is_refused_with_the_owner_pid(tmp_path):
    run_dir = tmp_path / "run"
    with hold(run_dir):
        with (
            pytest.raises(RunDirInUse, match=f"is in use by another andrea-train \\(pid {os.getpid()}\\)"),
            hold(run_dir),
        ):
            pass
        done = subprocess.run(
            [*TRAIN, *QUICK, f"hydra.run.dir={run_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            f"andrea-train: error: hydra.run.dir={run_dir} is in use by another andrea-train (pid {os.getpid()}); "
            "wait for it to end, or give this run its own hydra.run.dir"
        ]
        assert not (run_dir / "checkpoints").exists()
    with hold(run_dir):  # released when its holder is done
        pass


def test_a_killed_holder_releases_the_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from andrea.train.run_dir import hold\nimport time\nwith hold({str(run_dir)!r}):\n"
            "    print('held', flush=True)\n    time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunDirInUse, match=f"pid {holder.pid}"), hold(run_dir):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    with hold(run_dir):  # the kernel released the lock with the process
        pass


def test_a_full_disk_keeps_the_previous_checkpoint_and_leaves_no_partial(tmp_path):
    path = tmp_path / "checkpoints" / "last.ckpt"
    path.parent.mkdir()
    path.write_bytes(b"the previous checkpoint")
    partial = path.with_name(f".last.ckpt.{os.getpid()}.partial")
    partial.symlink_to("/dev/full")  # every write to it fails with ENOSPC, as on a full disk
    with pytest.raises(DiskError) as err:
        AtomicCheckpointIO().save_checkpoint({"weights": torch.zeros(1024)}, path)
    message = str(err.value)
    assert message.startswith(f"writing a checkpoint failed at {path}: No space left on device (")
    assert message.endswith(f"MiB free on {path.parent}); free some space") and "\n" not in message
    assert err.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"the previous checkpoint"
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no partial file left


def test_torch_save_stopping_part_way_is_the_disk_line(tmp_path, monkeypatch):
    """torch.save reports a write cut short (a disk filling up under it) as RuntimeError('unexpected pos ...')."""
    path = tmp_path / "checkpoints" / "last.ckpt"
    path.parent.mkdir()
    path.write_bytes(b"the previous checkpoint")

    def cut_short(obj, f):
        f.write(b"half a checkpoint")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1472 vs 1366")

    monkeypatch.setattr(torch, "save", cut_short)
    with pytest.raises(DiskError) as err:
        AtomicCheckpointIO().save_checkpoint({"weights": torch.zeros(4)}, path)
    message = str(err.value)
    assert message.startswith(f"writing a checkpoint failed at {path}: No space left on device? the write stopped ")
    assert "unexpected pos 1472 vs 1366" in message and message.endswith("free some space") and "\n" not in message
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]


def test_the_partial_file_of_a_killed_writer_is_removed_at_the_next_start(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    stale = checkpoints / f".last.ckpt.{int(dead.stdout)}.partial"  # its writer was SIGKILLed mid-write
    live = checkpoints / f".last.ckpt.{os.getppid()}.partial"  # a live process's: not ours to remove
    for partial in (stale, live):
        partial.write_bytes(b"half")
    with hold(tmp_path):
        assert not stale.exists() and live.exists()


def test_a_full_disk_mid_run_stops_the_run_with_the_last_checkpoint_kept(tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "last.ckpt").write_bytes(b"an earlier attempt's checkpoint")
    (checkpoints / f".last.ckpt.{os.getpid()}.partial").symlink_to("/dev/full")
    with pytest.raises(DiskError, match="writing a checkpoint failed at .*last.ckpt: No space left on device"):
        train(compose_train(run_dir, QUICK))
    assert (checkpoints / "last.ckpt").read_bytes() == b"an earlier attempt's checkpoint"
    assert not list(checkpoints.glob(".*.partial"))


@pytest.mark.slow  # reason: a run into a folder it cannot write (5 s)
def test_a_read_only_run_dir_is_one_line(tmp_path):
    done = subprocess.run(
        [*TRAIN, *QUICK, "hydra.run.dir=/sys/andrea-run"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2  # refused before any work
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "andrea-train: error: writing the run's files failed at /sys/andrea-run: Operation not permitted ("
    )
    assert line.endswith("give a writable hydra.run.dir")


@pytest.mark.slow  # reason: a training run stopped by its time limit (4 s)
def test_max_time_stops_inside_the_first_epoch(tmp_path):
    long_epoch = [
        "data.num_train=65536",
        "trainer.max_epochs=1",
        "trainer.max_time=00:00:00:03",
        "logger=none",
        "~callbacks.attention_maps",
    ]
    result = train(compose_train(tmp_path / "run", long_epoch))
    assert result.global_step is not None and result.wall_s is not None
    assert 0 < result.global_step < 65536 // 64  # stopped on time, not at the epoch's end
    assert result.wall_s < 60


def test_a_checkpoints_folder_that_cannot_be_written_is_refused_when_the_run_dir_is_held(tmp_path, monkeypatch):
    """A resumed run whose folder sits on a read-only mount: one line when andrea-train takes the run dir, before
    any training, not at its first checkpoint. Root ignores file modes, so the OS error is injected."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    real_open = os.open

    def read_only(path, flags, *args):
        if Path(path).name.startswith(".writable-"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    refused = pytest.raises(DiskError, match=r"writing a checkpoint failed at .*checkpoints: Read-only file system")
    with refused as err, hold(run_dir):
        pytest.fail("the run dir was held")
    assert "\n" not in str(err.value) and str(err.value).endswith("give a writable hydra.run.dir")
    assert not list((run_dir / "checkpoints").iterdir())  # no probe left behind
