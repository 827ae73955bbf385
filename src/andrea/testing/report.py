"""The parity matrices printed at the end of a test run: every cell passed, failed, or unsupported with the reason
declared. A pytest hook: the kit's conftest and andrea's own use it, and it prints once however many load it.

    attention     a row per backend and mask, a column per head config, a character per variant (dtype, pass,
                  score bias): each backend against naive, a `~mechanism` row against the mechanism's formula
    token mixer   a row per mixer and mask, a column per form (parallel, chunked, recurrent; `own` for a mixer
                  with one), a character per check: float32 forward and backward and bfloat16 forward against
                  the mixer's recurrence, and decoding from an empty and from a prefilled cache
    selection     a row per selection of keys and mask, a column per head configuration, a character per check:
                  forward and backward against dense attention over the chosen keys, decoding, keeping every key

The tables stay ~70 characters wide however many plugins are installed. A cell is recorded (`recorder`) before
its check runs, so a failed check is drawn X and counted: each matrix's count equals pytest's own for its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter

PASSED, FAILED, NOT_RUN = ".", "X", " "
STATUS = "parity_status"  # the user property a cell's outcome is recorded under (none: passed)
PRINTED = pytest.StashKey[bool]()


@dataclass(frozen=True)
class Matrix:
    title: str
    key: str  # the user property its cells are recorded under: (row, row, column, variant)
    heads: tuple[str, str, str]  # what the two row names and a column name
    variants: tuple[str, ...]  # each column's characters, in order


ATTENTION = Matrix(
    "attention parity matrix (each backend against naive; a ~mechanism row against its formula)",
    "parity_cell",
    ("backend", "mask", "head config"),
    ("float32 forward", "float32 backward", "bfloat16 forward", "bfloat16 backward", "float32 forward +alibi",
     "float32 backward +alibi"),
)  # fmt: skip
MIXERS = Matrix(
    "token mixer parity matrix (every form against the mixer's recurrence)",
    "mixer_cell",
    ("mixer", "mask", "form"),
    ("float32 forward", "float32 backward", "bfloat16 forward", "decode empty", "decode prefilled"),
)
SELECTIONS = Matrix(
    "selection parity matrix (each selection against dense attention over the keys it chose)",
    "selection_cell",
    ("selection", "mask", "heads"),
    ("forward", "backward", "decode", "keeping every key"),
)
Cell = tuple[str, str, str, str]  # (row, row, column, variant)


def recorder(record_property: Callable[[str, object], None], matrix: Matrix, cell: Cell) -> Callable[[str], None]:
    """Records the cell before its check runs (a failed check still has its cell: the report draws X), and
    returns what records the check's status: 'passed' or 'unsupported: <the reason declared>'."""
    assert cell[3] in matrix.variants, f"{cell}: not one of {matrix.title}'s variants"
    record_property(matrix.key, cell)
    return lambda status: record_property(STATUS, status)


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """Each matrix with a cell in this run: every cell passed, failed, or unsupported with its declared reason."""
    stash = terminalreporter.config.stash
    if stash.get(PRINTED, False):  # a second conftest importing this hook
        return
    stash[PRINTED] = True
    for matrix in (ATTENTION, MIXERS, SELECTIONS):
        reasons: dict[str, int] = {}
        cells = _cells(terminalreporter, matrix, reasons)
        if cells:
            terminalreporter.section(matrix.title)
            for line in _summary(matrix, cells, reasons):
                terminalreporter.write_line(line)


def _summary(matrix: Matrix, cells: dict[Cell, str], reasons: dict[str, int]) -> list[str]:
    """The matrix's table, its legend, its counts and its numbered reasons."""
    symbols = list(cells.values())
    passed, failed = symbols.count(PASSED), symbols.count(FAILED)
    counts = {"passed": passed, "failed": failed, "unsupported": len(symbols) - passed - failed}
    return [
        *_table(matrix, cells),
        f"each column, per {matrix.heads[2]}: {', '.join(matrix.variants)}",
        f"{PASSED} passed, {FAILED} failed, n unsupported for reason [n], blank not run",
        f"{len(cells)} cells: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
        *(f"[{number}] {reason}" for reason, number in reasons.items()),
    ]


def _cells(terminalreporter: TerminalReporter, matrix: Matrix, reasons: dict[str, int]) -> dict[Cell, str]:
    """Each of the matrix's cells the run recorded and its symbol; an unsupported one's reason numbered in `reasons`."""
    cells: dict[Cell, str] = {}
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            props = dict(getattr(report, "user_properties", ()))
            if report.when != "call" or matrix.key not in props:
                continue
            first, second, column, variant = props[matrix.key]
            status = props.get(STATUS, "passed") if outcome == "passed" else "FAILED"
            cells[(first, second, column, variant)] = _symbol(status, reasons)
    return cells


def _symbol(status: str, reasons: dict[str, int]) -> str:
    if status.startswith("unsupported"):
        return str(reasons.setdefault(status, len(reasons) + 1))
    return PASSED if status == "passed" else FAILED


def _table(matrix: Matrix, cells: dict[Cell, str]) -> list[str]:
    """The matrix's lines: a row per pair of row names, a column per column name, a character per variant."""
    columns = list(dict.fromkeys(cell[2] for cell in cells))
    rows = sorted(dict.fromkeys(cell[:2] for cell in cells))
    widths = [max(len(column), len(matrix.variants)) for column in columns]
    first, second = (max(len(names[i]) for names in [matrix.heads[:2], *rows]) for i in (0, 1))

    def line(names: tuple[str, str], drawn: list[str]) -> str:
        text = "  ".join(f"{column:{width}}" for column, width in zip(drawn, widths, strict=True))
        return f"{names[0]:{first}} {names[1]:{second}}  {text}".rstrip()

    return [line(matrix.heads[:2], columns), *(line(row, _drawn(matrix, cells, row, columns)) for row in rows)]


def _drawn(matrix: Matrix, cells: dict[Cell, str], row: tuple[str, str], columns: list[str]) -> list[str]:
    """A row's columns: each a character per variant, blank where its cell did not run."""
    return ["".join(cells.get((*row, column, variant), NOT_RUN) for variant in matrix.variants) for column in columns]
