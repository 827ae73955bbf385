"""The sweep report: curves.png (every job's train and val loss overlaid) and report.html (one
self-contained page: the curves inline, a row per job under headers that say what each number is, the
columns sorted by a click), rewritten after every job of a multirun.

Jobs are labelled by the overrides that differ between them (`attention=sdpa heads=gqa`), not by
the whole command line they share.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from andrea.lens.heads import SHORT_NAMES
from andrea.train.sweep_roles import ROLES_FIGURE

if TYPE_CHECKING:
    from andrea.utils.run_result import RunResult

CURVES = "curves.png"
HEADERS = {  # the summary's column -> what report.html's header calls it
    "differs": "differs (the job's label)", "exit_code": "exit code", "train_loss": "train loss (last 20 steps)",
    "val_loss": "val loss", "val_acc": "val acc", "tokens_per_s": "tokens/s (median)",
    "tokens_per_s_p25_p75": "tokens/s (p25-p75)", "heads": "best head per role", "wall_s": "wall (s)",
    "run_dir": "run dir", "tokens_per_cpu_s": "tokens/CPU s", "load": "load (max)",
}  # fmt: skip
WRAPPED = ("differs", "heads", "verdict", "error", "run_dir")  # long text: wrapped, so the table fits a window
SORT = """
document.querySelectorAll("thead th").forEach((th, column) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], rows = Array.from(body.rows);
  const key = row => { const cell = row.cells[column]; return cell.dataset.value ?? cell.textContent; };
  const down = th.dataset.sorted !== "up";
  rows.sort((a, b) => {
    const x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
    const order = isNaN(nx) || isNaN(ny) ? String(x).localeCompare(String(y)) : nx - ny;
    return down ? order : -order;
  });
  th.closest("thead").querySelectorAll("th").forEach(other => delete other.dataset.sorted);
  th.dataset.sorted = down ? "up" : "down";
  body.append(...rows);
}));
"""
GROUPED_CURVES = "curves_by_setting.png"  # andrea.train.sweep_groups: each setting over its seeds


def differing_overrides(jobs: list[list[str]]) -> list[str]:
    """Each job's label: its overrides whose key is set differently (or not at all) in another job."""
    parsed = [dict(o.partition("=")[::2] for o in overrides) for overrides in jobs]
    varying = _varying(parsed) if len(jobs) > 1 else list(dict.fromkeys(k for job in parsed for k in job))
    return [" ".join(f"{k}={job[k]}" for k in varying if k in job) or "defaults" for job in parsed]


def _varying(parsed: list[dict[str, str]]) -> list[str]:
    """The keys, in the order first given, whose value differs between the jobs (or is set in some only)."""
    keys = dict.fromkeys(k for job in parsed for k in job)
    return [k for k in keys if len({job.get(k) for job in parsed}) > 1]


def heads_cell(roles: dict | None) -> str:
    """The best head per role, short: `prev L0H1 0.95 · ind n/a`."""
    parts = []
    for role, r in (roles or {}).items():
        name = SHORT_NAMES.get(role, role)
        parts.append(f"{name} n/a" if r["best"] is None else f"{name} {r['best']} {r['score']:.2f}")
    return " · ".join(parts)


def plot_curves(results: list[RunResult], labels: list[str], path: Path) -> None:
    """Train loss (left) and val loss (right) against the step, a line per job that has curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (train_ax, val_ax) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100, layout="constrained")
    styles = ["-", "--", ":", "-."]  # jobs that train alike (two backends) overlap: the dashes show both
    few = all(len((r.curves or {}).get("val") or []) <= 2 for r in results)  # a one-epoch sweep: bars, not dots
    for number, (result, label) in enumerate(zip(results, labels, strict=True)):
        style = styles[number // 10 % len(styles)] if len(results) > 10 else styles[number % len(styles)]
        _plot_job(train_ax, val_ax, result.curves or {}, number, label, style, few)
    if few:  # one bar per job, labelled, its last val loss
        val_ax.set_yticks(range(len(labels)), labels, fontsize=7)
        val_ax.invert_yaxis()
    _dress(train_ax, "train loss (every step)", "step")
    _dress(val_ax, *(("val loss at the end", "val loss") if few else ("val loss", "step")))
    if train_ax.has_data():
        fig.legend(*train_ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    fig.savefig(path)
    plt.close(fig)


def _plot_job(train_ax: Any, val_ax: Any, curves: dict, number: int, label: str, style: str, few: bool) -> None:
    """One job's train curve, and its val curve beside it (or, with few validations, a bar of the last one)."""
    if not curves.get("train"):
        return
    steps, losses = zip(*curves["train"], strict=True)
    (line,) = train_ax.plot(steps, losses, linestyle=style, linewidth=1.2, alpha=0.85, label=label)
    if curves.get("val") and few:
        val_ax.barh(number, curves["val"][-1][1], color=line.get_color())
    elif curves.get("val"):
        steps, losses = zip(*curves["val"], strict=True)
        val_ax.plot(steps, losses, linestyle=style, marker="o", markersize=3, color=line.get_color())


def _dress(ax: Any, title: str, x_label: str) -> None:
    """A panel's title, x label and grid; a log scale where its positive values span more than a decade."""
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(x_label)
    ax.grid(alpha=0.3)
    if ax.has_data() and min(ax.dataLim.y0, 1e9) > 0 and ax.dataLim.y1 / max(ax.dataLim.y0, 1e-12) > 10:
        ax.set_yscale("log")


def write_html(
    path: Path, rows: list[dict], columns: list[str], grouped: list[dict] | None = None, study: str = ""
) -> Path:
    """The sweep's report.html at `path`, in its sweep dir: a reproduction's verdicts and figure (`study`, HTML
    from andrea.train.studies.report) first, the sweep's curves (inlined) and its table, first its settings with
    their seeds grouped (andrea.train.sweep_groups) when it has any; no network; one small script sorts a table by
    a column."""
    sweep_dir = path.parent
    image = inline_png(sweep_dir / CURVES)
    names = {c: html.escape(HEADERS.get(c, c)) for c in columns}
    head = "".join(f'<th data-key="{c}" title="click to sort by {names[c]}">{names[c]}</th>' for c in columns)
    body = "".join(
        f'<tr class="{html.escape(str(row["status"]))}">' + "".join(_cell(row, c) for c in columns) + "</tr>"
        for row in rows
    )
    by_setting = _grouped_section(sweep_dir, grouped) if grouped else ""
    roles = inline_png(sweep_dir / ROLES_FIGURE)
    over_training = (
        f'<h2>Head roles over training</h2><img alt="each role\'s best head score against the step" '
        f'src="data:image/png;base64,{roles}">'
        if roles
        else ""
    )
    done = sum(row["status"] == "completed" for row in rows)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>andrea sweep {html.escape(sweep_dir.name)}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1380px; }}
table {{ border-collapse: collapse; margin-top: 1em; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; white-space: nowrap; }}
th {{ background: #f0f0f0; white-space: normal; cursor: pointer; vertical-align: bottom; max-width: 8em; }}
th[data-sorted="up"]::after {{ content: " ▲"; }} th[data-sorted="down"]::after {{ content: " ▼"; }}
td.wrap {{ white-space: normal; overflow-wrap: anywhere; min-width: 6em; max-width: 16em; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
tr.failed td, tr.killed td {{ background: #fde8e8; }} tr.interrupted td {{ background: #fff6dc; }}
img {{ max-width: 100%; }} table.claims td {{ max-width: 24em; }} td.verdict {{ font-weight: bold; }}
</style></head><body>
<h1>Sweep {html.escape(sweep_dir.name)}</h1>
<p>{done} of {len(rows)} jobs completed. Folder: <code>{html.escape(str(sweep_dir))}</code></p>
{study}{by_setting}
<h2>Every job</h2>
{_ran_on(rows)}
{f'<img alt="train and val loss of every job" src="data:image/png;base64,{image}">' if image else ""}
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{over_training}
<script>{SORT}</script>
</body></html>
"""
    path.write_text(page)
    return path


def busy_note(rows: list[dict]) -> str:
    """A line naming the jobs that trained while the machine's load exceeded its cores, or ''."""
    busy = [str(row["job"]) for row in rows if str(row.get("load", "")).endswith("(busy)")]
    if not busy:
        return ""
    return (
        f"Jobs {', '.join(busy)} trained while the machine's load exceeded its cores: their wall tokens/s is lower "
        "than the machine gives one job alone; tokens_per_cpu_s compares them."
    )


def _ran_on(rows: list[dict]) -> str:
    """What the jobs ran on (commit, versions, threads, seed), each record once with the jobs that share it, and
    the jobs that trained while the machine's load exceeded its cores."""

    jobs: dict[str, list[str]] = {}
    for row in rows:
        if row.get("environment"):
            jobs.setdefault(str(row["environment"]), []).append(str(row["job"]))
    items = "".join(f"<li>{html.escape(env)}: jobs {', '.join(numbers)}</li>" for env, numbers in jobs.items())
    busy = f"<p>{html.escape(note)}</p>" if (note := busy_note(rows)) else ""
    return (f'<p>Ran on:</p><ul class="ran-on">{items}</ul>' if items else "") + busy


def _cell(row: dict, column: str) -> str:
    """One <td>: numbers right-aligned and rounded (the exact value kept for sorting), long text wrapped, the
    run dir a link to its folder, with its log's below."""
    value = row.get(column)
    if column == "run_dir" and value:
        name = html.escape(Path(value).name)
        return f'<td class="wrap"><a href="{name}/">{name}/</a>{_log_link(row)}</td>'
    if isinstance(value, float):
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if column == "wall_s" else f"{value:.3f}"
        return f'<td class="num" data-value="{value!r}">{shown}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num" data-value="{value}">{value:,}</td>'
    wrap = ' class="wrap"' if column in WRAPPED else ""
    return f"<td{wrap}>{'' if value is None else html.escape(str(value))}</td>"


def _log_link(row: dict) -> str:
    """The job's log, linked relative to the sweep dir (the page's folder), under its run dir."""
    if not row.get("log"):
        return ""
    relative = os.path.relpath(os.path.abspath(row["log"]), os.path.abspath(Path(row["run_dir"]).parent))
    return f'<br><a href="{html.escape(relative)}" title="{html.escape(relative)}">log</a>'


def inline_png(png: Path) -> str:
    """A PNG's bytes as base64 for a data: URL in a page ('' where it was not drawn)."""
    return base64.b64encode(png.read_bytes()).decode() if png.exists() else ""


def _grouped_section(sweep_dir: Path, grouped: list[dict]) -> str:
    """The settings' table (mean and min-max over seeds) and their curves."""
    columns = list(grouped[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    cell = {c: '<td class="wrap">' if c in ("setting", "first-token mass") else "<td>" for c in columns}
    body = "".join(
        "<tr>" + "".join(f"{cell[c]}{html.escape(row[c])}</td>" for c in columns) + "</tr>" for row in grouped
    )
    image = inline_png(sweep_dir / GROUPED_CURVES)
    curves = f'<img alt="train loss of every setting over its seeds" src="data:image/png;base64,{image}">'
    return f"""<h2>By setting, seeds grouped: mean (min to max)</h2>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{curves if image else ""}"""
