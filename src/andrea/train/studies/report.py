"""A study's sweep read into its verdicts: reproduction.md and reproduction.json beside the sweep's summary, its
figure (<study>.png), and a section at the top of report.html; `verdict_lines` says them on the console.

The study and its settings are read from the config Hydra saved in the sweep dir (multirun.yaml), as plain
values mapped onto our own classes (andrea.train.studies.STUDIES). Rewritten with the sweep's summary after every
job: a sweep that stops part-way says what its finished jobs show, a missing job makes its claims inconclusive.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from andrea.train.studies import build
from andrea.train.studies.base import Job
from andrea.train.sweep_report import inline_png
from andrea.utils.run_result import RunResult

FINDINGS = "reproduction.json"


def write_study(sweep_dir: Path, settings: dict[str, Any], results: Sequence[RunResult]) -> str:
    """The study's files in `sweep_dir`; returns report.html's section."""
    study = build(settings)
    jobs = [Job(r) for r in results if r.status == "completed"]
    figure = sweep_dir / f"{study.name}.png"
    claims = study.findings(jobs, figure)
    found = {
        "study": study.name,
        "title": study.title,
        "settings": dataclasses.asdict(study),
        "jobs": len(jobs),
        "figure": figure.name if figure.exists() else None,
        "claims": [dataclasses.asdict(claim) for claim in claims],
    }
    (sweep_dir / FINDINGS).write_text(json.dumps(found, indent=2))
    (sweep_dir / "reproduction.md").write_text(_markdown(found))
    return _html(found, figure)


def verdict_lines(sweep_dir: Path) -> list[str]:
    """One console line per claim of the sweep's study: `holds: <claim> (paper: ...; here: ...)`."""
    path = Path(sweep_dir) / FINDINGS
    if not path.is_file():
        return []
    found = json.loads(path.read_text())
    lines = [f"{found['title']}, {found['jobs']} jobs:"]
    lines += [
        f"  {c['verdict'].upper()}: {c['claim']} (paper: {c['paper']}; here: {c['ours']})" for c in found["claims"]
    ]
    return lines


def _markdown(found: dict[str, Any]) -> str:
    rows = [f"| {c['claim']} | {c['paper']} | {c['ours']} | **{c['verdict']}** |" for c in found["claims"]]
    figure = f"![{found['study']}]({found['figure']})\n\n" if found["figure"] else ""
    return (
        f"# {found['title']}\n\n{figure}| claim | paper | here | verdict |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    )


def _html(found: dict[str, Any], figure: Path) -> str:
    rows = "".join(
        f'<tr><td class="wrap">{html.escape(c["claim"])}</td><td class="wrap">{html.escape(c["paper"])}</td>'
        f'<td class="wrap">{html.escape(c["ours"])}</td><td class="verdict">{html.escape(c["verdict"])}</td></tr>'
        for c in found["claims"]
    )
    data = inline_png(figure)
    image = f'<img alt="{html.escape(found["title"])}" src="data:image/png;base64,{data}">' if data else ""
    return (
        f'<h2>Reproduction: {html.escape(found["title"])}</h2>\n<table class="claims"><thead><tr><th>claim</th>'
        f"<th>paper</th><th>here</th><th>verdict</th></tr></thead><tbody>{rows}</tbody></table>\n{image}\n"
    )
