"""The sweep summary: one row per job of a multirun, as markdown and CSV in the sweep dir.

Rewritten after every job (so a sweep that stops part-way still has its rows)
and once more when the sweep ends. A job that failed gets a row with its error.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from andrea.config import is_multirun

RESULT_FILE = "result.json"  # what every job writes into its run dir

COLUMNS = ["job", "overrides", "status", "train_loss", "val_loss", "val_acc", "tokens_per_s", "wall_s", "run_dir"]


def write_summary(sweep_dir: str | Path) -> list[dict]:
    sweep_dir = Path(sweep_dir)
    rows = []
    for path in sorted(sweep_dir.glob(f"*/{RESULT_FILE}"), key=lambda p: _job_number(p.parent.name)):
        result = json.loads(path.read_text())
        rows.append({"job": path.parent.name, **{k: result.get(k) for k in COLUMNS if k != "job"}})
        rows[-1]["overrides"] = " ".join(rows[-1]["overrides"] or [])
    with open(sweep_dir / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(row[k]) for k in COLUMNS) + " |" for row in rows]
    (sweep_dir / "summary.md").write_text("\n".join(lines) + "\n")
    return rows


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4f}"
    return "" if value is None else str(value).replace("|", "\\|")


def _job_number(name: str) -> int:
    return int(name) if name.isdigit() else 1 << 30


class SweepSummary(Callback):
    """Hydra callback (hydra.callbacks in conf/hydra/default.yaml)."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs) -> None:
        if not is_multirun():
            return
        run_dir = Path(config.hydra.runtime.output_dir)
        if job_return.status == JobStatus.FAILED:
            error = job_return._return_value
            (run_dir / RESULT_FILE).write_text(json.dumps({
                "status": f"failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
                "overrides": list(job_return.overrides or []),
                "run_dir": str(run_dir),
            }, indent=2))  # fmt: skip
        write_summary(config.hydra.sweep.dir)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_summary(config.hydra.sweep.dir)
