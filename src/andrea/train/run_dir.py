"""One run per run dir, and disk trouble said in one line.

hold(run_dir)   an exclusive OS lock on <run dir>/.lock for as long as the run lives; the
                kernel releases it when the process ends, however it ends (SIGKILL too), so
                a killed run never blocks its own resume. A second andrea-train in the same
                dir is refused with the owner's pid; a requeued SLURM job (`wait_s`) waits
                for its previous attempt to exit instead. Once held, the partial files a process
                killed mid-write left (`.<file>.<pid>.partial`) are removed: their writer is gone.
wait_until_free(run_dir, s)   until no process holds the run dir (a requeued job, before it reads the dir)
DiskError       a write that failed (disk full, read-only, quota): what, where, and the
                space left, raised in place of the bare OSError.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from andrea.utils.files import write_probe

LOCK_FILE = ".lock"
LAST = "last.ckpt"  # <run dir>/checkpoints/last.ckpt: the checkpoint a run resumes from (andrea.train.lit.resume)
REQUEUE_WAIT_S = 300  # how long a requeued SLURM job waits for its earlier attempt to release the run dir


class RunDirInUse(ValueError):
    """Another live process holds the run dir."""


class DiskError(OSError):
    """A write into the run dir failed; the message is one line."""


@contextmanager
def hold(run_dir: str | Path, wait_s: float = 0) -> Iterator[None]:
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise disk_error(err, "creating the run dir's lock file", run_dir / LOCK_FILE) from None
    try:
        _lock(fd, run_dir, wait_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        remove_stale_partials(run_dir)
        check_writable(run_dir / "checkpoints")
        yield
    finally:
        os.close(fd)  # releases the lock


def check_writable(folder: Path) -> None:
    """A file can be made in `folder` (or, while it does not exist yet, in the folder that will hold it) and
    removed again: a resumed run whose checkpoints folder is on a read-only mount is refused in one line now, not
    at its first checkpoint, after training. Root ignores file modes, so only a real write tells."""
    err = write_probe(folder if folder.is_dir() else folder.parent)
    if err is not None:
        raise disk_error(err, "writing a checkpoint", folder)


def wait_until_free(run_dir: str | Path, wait_s: float) -> None:
    """Return once no process holds the run dir (RunDirInUse after `wait_s`); holds nothing itself."""
    lock = Path(run_dir) / LOCK_FILE
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        _lock(fd, Path(run_dir), wait_s)
    finally:
        os.close(fd)  # and the lock with it


def _lock(fd: int, run_dir: Path, wait_s: float) -> None:
    deadline, said = time.monotonic() + wait_s, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            if time.monotonic() >= deadline:
                raise RunDirInUse(
                    f"hydra.run.dir={run_dir} is in use by another andrea-train (pid {owner}); wait for it to end, "
                    "or give this run its own hydra.run.dir"
                ) from None
            if not said:
                print(f"waiting for the run dir's lock, held by pid {owner} (an earlier attempt)", file=sys.stderr)
                said = True
            time.sleep(1)


def remove_stale_partials(run_dir: Path) -> list[Path]:
    """Remove the partial files (`.<file>.<pid>.partial`, andrea.train.lit.resume.AtomicCheckpointIO) whose
    writer is no longer alive: a SIGKILL mid-write leaves one behind. Returns what was removed."""
    removed = []
    for partial in run_dir.rglob(".*.partial"):
        pid = partial.name.rsplit(".", 2)[-2]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            partial.unlink(missing_ok=True)
            removed.append(partial)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal sent: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def disk_error(err: OSError, what: str, path: str | Path) -> DiskError:
    """`err` (raised while `what` on `path`) as one line: the reason and the space left there."""
    path = Path(path)
    folder = next((p for p in (path, *path.parents) if p.is_dir()), Path("/"))
    try:
        free = f"{shutil.disk_usage(folder).free / 1024**2:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    reason = err.strerror or str(err)
    fixes: dict[int | None, str] = {  # err.errno may be None
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space",
        errno.EROFS: "give a writable hydra.run.dir",
        errno.EACCES: "give a writable hydra.run.dir",
        errno.EPERM: "give a writable hydra.run.dir",
        errno.ENOENT: "give a hydra.run.dir that can be created",
        errno.ENOTDIR: "give a hydra.run.dir that can be created",
    }
    fix = fixes.get(err.errno, "check the disk")
    error = DiskError(f"{what} failed at {path}: {reason} ({free} on {folder}); {fix}")
    error.errno = err.errno
    return error
