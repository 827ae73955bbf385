"""The sweep summary: one row per job of a multirun, as markdown and CSV in the sweep dir, and the
sweep report beside them (andrea.train.sweep_report: curves.png, report.html); jobs that differ only in
their seed grouped as one setting (andrea.train.sweep_groups: groups.md, curves_by_setting.png).

Rewritten after every job (so a sweep that stops part-way still has its rows)
and once more when the sweep ends. Every job gets a row, whatever became of it:
`completed`, `interrupted` (a signal; it can be resumed), `failed` (an error, named in
`error`) or `killed` (its process died: only a launcher with a process per job sees
that, hydra_plugins.andrea_launchers), with the exit code the job's process had or
would have had (blank where the launcher cannot know it).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from andrea.train.errors import ConfigError
from andrea.train.hydra_internals import job_error, quiet
from andrea.train.hydra_run import is_multirun, job_log
from andrea.train.slurm import added_overrides
from andrea.utils.csv_cells import write_rows
from andrea.utils.environment import describe
from andrea.utils.run_result import RESULT_FILE, RunResult

# The report's writers (sweep_report, sweep_groups, sweep_roles) bring torch in through andrea.lens: they are
# imported when a summary is written, never by Hydra's start-up (its callbacks and its launcher plugins import
# this module for every andrea-train command, --help included).
REPORT = "report.html"

COLUMNS = [
    "job",
    "overrides",  # the job's own, in full
    "differs",  # those whose value differs between the sweep's jobs: the job's label
    "status",
    "exit_code",
    "error",
    "parameters",
    "train_loss",  # the mean of the last steps (andrea.train.lit.RunStats), not the epoch mean
    "val_loss",
    "val_acc",
    "tokens_per_s",  # the median over the steps...
    "tokens_per_s_p25_p75",  # ...and its spread
    "tokens_per_cpu_s",  # per second of the process's CPU time: what a busy machine leaves comparable
    "load",  # the highest 1-minute load average while it trained, against the machine's cores
    "heads",  # the best head per role
    "verdict",
    "wall_s",
    "environment",  # commit, versions, threads, seed (andrea.utils.environment)
    "run_dir",
    "log",  # the job's log: the launcher's (submitit's) file of a launched job, its errors too
]
SWEEP_DIR_ATTRIBUTE = "andrea_sweep_dir"  # set on a failed job's error: the sweep it ends, for the one line


def mark_failed(error: BaseException, sweep_dir: str | Path) -> None:
    """Say on a failed job's error which sweep it belongs to: Hydra's sweeper raises it after the batch, and
    andrea-train turns it into one line about the sweep (`failed_sweep_dir`). Pickled with the error, so a
    job in a process of its own (hydra/launcher=local, slurm) hands it back too."""
    setattr(error, SWEEP_DIR_ATTRIBUTE, str(sweep_dir))


def failed_sweep_dir(error: BaseException) -> str | None:
    """The sweep a job's error ended (`mark_failed`), None for any other error."""
    return getattr(error, SWEEP_DIR_ATTRIBUTE, None)


def job_failed(
    run_dir: Path,
    overrides: Sequence[str],
    error: BaseException | None,
    exit_code: int | str | None,
    status: str = "failed",
    log: str | None = None,
    attempts: Sequence[dict] = (),
) -> None:
    """The result.json of a job that did not complete, so the summary has its row (`log`: the job's own,
    from within the job when not given; "" for none; `attempts`: the run's record, lit.attempts)."""
    if exit_code is None:  # what the job would have exited with on its own
        exit_code = 2 if isinstance(error, ConfigError) else 1
    error_text = _error_text(error) if error is not None else ""
    log = job_log() if log is None else log or None
    result = RunResult(status, exit_code, str(run_dir), list(overrides), error=error_text, log=log)
    result.attempts = list(attempts)
    result.write(run_dir / RESULT_FILE)


def _error_text(error: BaseException) -> str:
    """`Type: first line of the message`."""
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def failure_line(sweep_dir: str | Path, error: BaseException) -> str:
    """One line for a sweep that ended with jobs not completed: which, and where their rows are."""
    rows = write_summary(sweep_dir) if Path(sweep_dir).is_dir() else []
    bad = [row for row in rows if row["status"] != "completed"]
    if not bad:  # the sweep itself failed (a launcher, a sweeper), not one of its jobs
        return f"the sweep {sweep_dir} stopped: {_error_text(error)}"
    jobs = "; ".join(
        f"job {row['job']} ({row['overrides'] or 'defaults'}) {row['status']}, exit "
        f"{row['exit_code'] if row['exit_code'] not in (None, '') else 'code unknown'}"
        for row in bad
    )
    return f"{len(bad)} of {len(rows)} jobs did not complete: {jobs}; every job's row is in {Path(sweep_dir) / REPORT}"


def write_summary(sweep_dir: str | Path) -> list[dict]:
    """summary.md, summary.csv, curves.png and report.html in the sweep dir; returns the rows."""
    from andrea.train.sweep_groups import seed_groups, write_groups
    from andrea.train.sweep_report import CURVES, busy_note, differing_overrides, heads_cell, plot_curves, write_html
    from andrea.train.sweep_roles import write_roles
    from andrea.train.sweep_saved import best_over, mad_section, study_section

    sweep_dir = Path(sweep_dir)
    paths = sorted(sweep_dir.glob(f"*/{RESULT_FILE}"), key=lambda p: _job_number(p.parent.name))
    results = [RunResult.read(path) for path in paths]
    labels = differing_overrides([result.overrides for result in results])
    rows = [
        {**_row(path.parent.name, result, label), "heads": heads_cell(result.roles)}
        for path, result, label in zip(paths, results, labels, strict=True)
    ]
    with open(sweep_dir / "summary.csv", "w", newline="") as f:
        write_rows(f, COLUMNS, rows)  # an override such as ++seed=1 stays text in a spreadsheet
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(row[k]) for k in COLUMNS) + " |" for row in rows]
    lines += ["", note] if (note := busy_note(rows)) else []
    (sweep_dir / "summary.md").write_text("\n".join(lines) + "\n")
    plot_curves(results, labels, sweep_dir / CURVES)
    groups = seed_groups(results, best_over(sweep_dir))
    grouped = write_groups(sweep_dir, groups) if groups else []
    write_roles(sweep_dir, results, labels, groups)
    found = study_section(sweep_dir, results) + mad_section(sweep_dir, results)
    # the log: in the run dir's cell; what the jobs ran on and the busy ones: above the table (sweep_report._ran_on)
    shown = [c for c in COLUMNS if c not in ("overrides", "error", "log", "environment", "load")] + ["error"]
    write_html(sweep_dir / REPORT, rows, shown, grouped, found)
    return rows


def _row(job: str, result: RunResult, label: str) -> dict:
    rate = result.tokens_per_s_steps
    return {
        **{k: getattr(result, k, None) for k in COLUMNS},
        "job": job,
        "overrides": " ".join(result.overrides),
        "differs": label,
        "tokens_per_s_p25_p75": f"{rate['p25']:,.0f}-{rate['p75']:,.0f}" if rate else None,
        "verdict": _verdict_cell(result.verdict),
        "load": _load_cell(result.load_max),
        "environment": describe(result.environment),
    }


def _load_cell(load: dict[str, float] | None) -> str:
    if not load:
        return ""
    busy = " (busy)" if load["load"] > load["cores"] else ""
    return f"{load['load']:.2f} on {load['cores']:.0f} cores{busy}"


def _verdict_cell(verdict: dict | None) -> str:
    if not verdict:
        return ""
    if verdict["role"] is None:
        return "needs no attention"
    return {True: f"found ({verdict['best']})", False: "NOT found", None: "cannot tell"}[verdict["appeared"]]


def _cell(value: object) -> str:
    """A markdown table cell: its text escaped (HTML from an override stays text; a `|` or a newline cannot
    break the table)."""
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4f}"
    text = "" if value is None else html.escape(" ".join(str(value).split()), quote=False)
    return text.replace("|", "\\|")


def done_line(result: RunResult) -> str:
    """A finished run in one line: its time, losses, accuracy and speed."""

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    rate, spread = result.tokens_per_s, result.tokens_per_s_steps
    speed = f"{rate:,.0f} tokens/s" if rate else ""
    speed += f" (p25-p75 {spread['p25']:,.0f}-{spread['p75']:,.0f})" if rate and spread else ""
    return (
        f"done in {result.wall_s or 0:.1f} s: train loss {fmt(result.train_loss)} (last steps), "
        f"val loss {fmt(result.val_loss)}, val acc {fmt(result.val_acc)}, {speed}"
    )


def job_line(result: RunResult, number: int | str | None) -> str:
    """The one console line of a multirun job, whichever launcher ran it."""
    verdict = f"; {result.verdict['text']}" if result.verdict else ""
    return f"job {number} ({' '.join(result.overrides) or 'defaults'}): {done_line(result)}{verdict}"


def _job_number(name: str) -> tuple[tuple[int, float | str], ...]:
    """A job dir's place in the report: its name's `-`-separated parts in turn, numbers by value (`7` before `12`;
    a sweep run as several commands into one dir names its subdirs by their settings, `gla-64-0.001`)."""
    return tuple(_part(part) for part in name.split("-"))


def _part(text: str) -> tuple[int, float | str]:
    try:
        return 0, float(text)
    except ValueError:
        return 1, text


class SweepSummary(Callback):
    """Hydra callback (hydra.callbacks in conf/hydra/default.yaml)."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if not is_multirun():
            return
        if job_return.status == JobStatus.FAILED:
            error = job_error(job_return)
            added = added_overrides()  # a requeued attempt's ckpt_path: not the user's
            overrides = [o for o in job_return.overrides or [] if o not in added]
            job_failed(Path(config.hydra.runtime.output_dir), overrides, error, None)
            mark_failed(error, config.hydra.sweep.dir)
            quiet(job_return)  # the sweep's one line names it, not Hydra's "Error executing job" before that
        write_summary(config.hydra.sweep.dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.sweeper.get("dry_run") or not Path(config.hydra.sweep.dir).is_dir():
            return  # no job launched (a dry run): the sweep dir, where there is one, is left as it was
        rows = write_summary(config.hydra.sweep.dir)
        done = sum(row["status"] == "completed" for row in rows)
        report = Path(config.hydra.sweep.dir) / REPORT
        print(f"sweep report: {report} ({done} of {len(rows)} jobs completed)", flush=True)
        from andrea.train.studies.report import verdict_lines

        for line in verdict_lines(Path(config.hydra.sweep.dir)):
            print(line, flush=True)
