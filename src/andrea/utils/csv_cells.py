"""CSV files that a spreadsheet opens as written: a cell that starts as a formula does (=, +, -, @, a tab or a
carriage return) and is not a number is written with a leading apostrophe, which a spreadsheet shows as text
(OWASP's advice against CSV injection). A sweep's `++seed=1` override is then text, not a formula; -0.5 stays
a number."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_text(value: Any) -> Any:
    """`value`, or a string that starts as a formula does, apostrophe first."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _number(value):
        return "'" + value
    return value


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_rows(f: IO[str], columns: list[str], rows: Iterable[Mapping[str, Any]], header: bool = True) -> None:
    """`rows` as CSV into `f` (opened with newline=""), every cell through `as_text`."""
    writer = csv.DictWriter(f, fieldnames=columns)
    if header:
        writer.writeheader()
    writer.writerows({key: as_text(value) for key, value in row.items()} for row in rows)
