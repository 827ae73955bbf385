"""roles.png: when each job's heads took on their roles. For every role a job's head_roles.csv holds (entropy
aside), the best head's score at each recorded step, a line per job, or per setting over its seeds (the mean,
a band from min to max) when the sweep has seeds; the line at 0.5 is where a verdict counts a head as the role.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from andrea.lens.verdict import THRESHOLD
from andrea.train.lit.role_history import HISTORY_FILE

if TYPE_CHECKING:
    from andrea.train.sweep_groups import Group
    from andrea.utils.run_result import RunResult

ROLES_FIGURE = "roles.png"

Series = dict[str, dict[int, float]]  # role -> step -> the best head's score


def best_per_step(run_dir: Path) -> Series:
    """A job's head_roles.csv as role -> step -> its best head's score (every role but entropy)."""
    path = run_dir / HISTORY_FILE
    series: Series = defaultdict(dict)
    if not path.is_file():
        return series
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["role"] != "entropy":
                steps = series[row["role"]]
                steps[int(row["step"])] = max(float(row["score"]), steps.get(int(row["step"]), float("-inf")))
    return series


def plot_roles(lines: list[tuple[str, list[RunResult]]], path: Path) -> bool:
    """One panel per role: each (label, results) pair a line (one result) or a mean with its band (several:
    the seeds of a setting), on the steps every result recorded. False when no job wrote head roles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    found = [(label, [best_per_step(Path(r.run_dir)) for r in results if r.run_dir]) for label, results in lines]
    roles = _roles(found)
    if not roles:
        return False
    fig, axes = plt.subplots(1, len(roles), figsize=(4.2 * len(roles) + 1, 3.6), dpi=100, layout="constrained")
    for ax, role in zip(np.atleast_1d(axes), roles, strict=True):
        for label, series in found:
            _plot_role(ax, label, [s[role] for s in series if s.get(role)])
        _dress(ax, role)
    first = np.atleast_1d(axes)[0]
    if first.has_data():
        fig.legend(*first.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    fig.savefig(path)
    plt.close(fig)
    return True


def _roles(found: list[tuple[str, list[dict[str, dict[int, float]]]]]) -> list[str]:
    return sorted({role for _, series in found for s in series for role in s})


def _dress(ax: Any, role: str) -> None:
    """A role's panel: the score a head needs (the dashed line), its title, its axes."""
    ax.axhline(THRESHOLD, color="grey", linewidth=0.8, linestyle="--")
    ax.set_title(f"{role}: the best head's score", fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)


def _plot_role(ax: Any, label: str, runs: list[dict[int, float]]) -> None:
    """One line of a role's panel: a run's best-head score per step, or the mean of several with their band,
    on the steps they all recorded."""
    import numpy as np

    steps = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
    if not steps:
        return
    scores = np.array([[r[step] for step in steps] for r in runs])  # (seeds, steps)
    (line,) = ax.plot(steps, scores.mean(axis=0), marker="o", markersize=2.5, linewidth=1.2, label=label)
    if len(runs) > 1:
        ax.fill_between(steps, scores.min(axis=0), scores.max(axis=0), color=line.get_color(), alpha=0.15)


def write_roles(sweep_dir: Path, results: list[RunResult], labels: list[str], groups: list[Group]) -> bool:
    """roles.png in the sweep dir: per setting over its seeds when `groups` has them, else per job."""
    if groups:
        lines = [(f"{g.label} ({len(g.completed)} seeds)", g.completed) for g in groups]
    else:
        lines = [(label, [r]) for label, r in zip(labels, results, strict=True) if r.status == "completed"]
    return plot_roles(lines, sweep_dir / ROLES_FIGURE)
