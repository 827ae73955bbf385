"""head_roles.csv: every record's head-role scores, one row per step, layer, head and role, in the run dir
whatever the loggers (a resumed run keeps the rows before its checkpoint's step and goes on after them).

    step,layer,head,role,score
    0,0,3,previous_token,0.1213
"""

from __future__ import annotations

import csv
from pathlib import Path

from andrea.lens.heads import RoleHead
from andrea.utils.csv_cells import write_rows

HISTORY_FILE = "head_roles.csv"
COLUMNS = ["step", "layer", "head", "role", "score"]


def start(path: Path, step: int) -> None:
    """A run (or a resumed attempt) begins at `step`: rows a killed attempt wrote from there on go."""
    if not path.is_file():
        return
    with path.open(newline="") as f:
        kept = [row for row in csv.DictReader(f) if int(row["step"]) < step]
    write(path, kept, mode="w")


def append(path: Path, step: int, scores: dict[RoleHead, float]) -> None:
    """One record's scores ({(role, layer, head): score}) as rows."""
    rows = [
        {"step": step, "layer": layer, "head": head, "role": role, "score": f"{value:.6g}"}
        for (role, layer, head), value in scores.items()
    ]
    write(path, rows, mode="a")


def write(path: Path, rows: list[dict], mode: str) -> None:
    new = mode == "w" or not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, newline="") as f:
        write_rows(f, COLUMNS, rows, header=new)
