"""A folder as on a read-only mount, for the tests of commands that refuse a place they cannot write."""

import errno
import os
from pathlib import Path


def read_only(monkeypatch, folder: Path) -> None:
    """`folder` as on a read-only mount: nothing can be made in it (root ignores file modes, so the error is
    injected where the OS would raise it)."""

    def refusing(make):
        def made_unless_in_folder(path, *args, **kwargs):
            if Path(path).parent == folder:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return make(path, *args, **kwargs)

        return made_unless_in_folder

    monkeypatch.setattr(os, "open", refusing(os.open))
    monkeypatch.setattr(os, "mkdir", refusing(os.mkdir))
