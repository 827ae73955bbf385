"""One way to write a file that is read later (a checkpoint, an export, a token cache, result.json):
whole or not at all; `staged` for several files moved in together, or one whose writer reads its format from its
name; and `unwritable`, asked before any work, so that a command refuses a place it cannot write in one line
instead of failing after it."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

SPECIAL_FILES = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yields the partial file to write instead of `path`: `.<name>.<pid>.partial` beside it (this
    process's own; the same folder, so the rename is atomic). When the block ends it is flushed to
    disk and renamed over `path`; on any error it is removed, and `path` keeps what it held."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield partial
        with open(partial, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


@contextmanager
def staged(folder: str | Path) -> Iterator[Path]:
    """Yields a hidden folder inside `folder` to write files into under their own names (matplotlib reads a
    picture's format from its suffix, which atomic_write's `.partial` hides). When the block ends each file is
    flushed to disk and renamed into `folder` over its namesake; on any error the staging folder is removed and
    `folder` keeps what it held (one made for the block is removed too)."""
    folder = Path(folder)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f".staged-{os.getpid()}-", dir=folder) as staging:
            yield Path(staging)
            for file in sorted(Path(staging).iterdir()):
                with open(file, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(file, folder / file.name)
    except BaseException:
        if made:
            with suppress(OSError):  # not empty: a file was moved in before the error
                folder.rmdir()
        raise


def unwritable(path: str | Path, folder: bool = False) -> str | None:
    """Why a command cannot write the file `path` (`folder`: the folder `path`, to write files into), in words
    that read on from the path ("is a FIFO"); None where it can."""
    path = Path(path)
    start = path if folder else path.parent
    where = next(p for p in (start, *start.parents) if p.exists())  # where its first new entry would be made
    return _what_stands_there(path, folder) or _takes_no_new_file(where)


def _what_stands_there(path: Path, folder: bool) -> str | None:
    """What a write at `path` would not turn into the file (or folder) asked for: a link to nothing (the write would
    replace the link, not make what it names), a special file (a device or a FIFO keeps no file), a folder."""
    if path.is_symlink() and not path.exists():
        return f"is a link to {os.readlink(path)}, which does not exist"
    if not path.exists():
        return None
    kind = SPECIAL_FILES.get(stat.S_IFMT(path.stat().st_mode))
    return f"is {kind}" if kind else "is a folder" if path.is_dir() and not folder else None


def _takes_no_new_file(folder: Path) -> str | None:
    """Why a file cannot be made in `folder`, in words, or None."""
    err = write_probe(folder)
    return None if err is None else f"cannot be written ({err.strerror or err})"


def write_probe(folder: Path) -> OSError | None:
    """The error that making (and removing) a file in `folder` meets, or None: only a real write tells, since root
    ignores file modes and a read-only mount does not."""
    probe = folder / f".writable-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        probe.unlink()
    except OSError as err:
        return err
    return None
