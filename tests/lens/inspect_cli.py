"""andrea-inspect run in this process as a user's shell would call it: exit code, stdout, stderr."""

import sys

from andrea.cli import inspect as inspect_cli


def run_inspect(args, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["andrea-inspect", *args])
    code: str | int | None
    try:
        inspect_cli.main()
        code = 0
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    return code, out.out, out.err
