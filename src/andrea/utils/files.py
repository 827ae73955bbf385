"""One way to write a file that is read later (a checkpoint, an export, a token cache, result.json):
whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
