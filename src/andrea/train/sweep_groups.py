"""A sweep's jobs grouped over seeds: jobs that differ only in `seed` are one setting, shown as the
mean and range of its seeds (groups.md, curves_by_setting.png, and a table in report.html).

Each setting's row: how many of its seeds completed, the val loss (mean, min to max), how many seeds meet the
task's verdict at the end, the step at which it was first met (the first attention-maps record that met it,
over the seeds that met it at all), the best head's score for the verdict's role at the end, the first-token (sink)
mass per layer (andrea.lens.head_roles.first_token_mass), parameters, the bytes one sequence's cache keeps at
full context (a KV cache grows with it, a recurrent state does not) and tokens/s.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from andrea.train.sweep_report import GROUPED_CURVES, differing_overrides

if TYPE_CHECKING:
    from andrea.utils.run_result import RunResult

GROUPS = "groups.md"
SEED = "seed"
COLUMNS = [
    "setting", "seeds", "val_loss", "verdict met at the end", "first met at step", "verdict score",
    "first-token mass", "parameters", "cache (bytes a sequence)", "tokens/s",
]  # fmt: skip


@dataclass
class Group:
    """One setting: its label (the overrides that differ, seed aside) and its jobs' results."""

    label: str
    results: list[RunResult]

    @property
    def completed(self) -> list[RunResult]:
        return [r for r in self.results if r.status == "completed"]


def seed_groups(results: list[RunResult]) -> list[Group]:
    """The jobs grouped by their overrides without `seed`, in the order each setting first appears; [] when
    no two jobs share a setting (nothing to group)."""
    unseeded = [[o for o in r.overrides if o.partition("=")[0].lstrip("+") != SEED] for r in results]
    labels = differing_overrides(unseeded)
    groups: dict[str, Group] = {}
    for label, result in zip(labels, results, strict=True):
        groups.setdefault(label, Group(label, [])).results.append(result)
    return list(groups.values()) if len(groups) < len(results) else []


def spread(values: list[float], digits: int = 3) -> str:
    """`mean (min to max)` of a setting's seeds, or the one value, or blank."""
    if not values:
        return ""
    mean = f"{statistics.fmean(values):,.{digits}f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):,.{digits}f} to {max(values):,.{digits}f})"


def group_row(group: Group) -> dict[str, str]:
    done = group.completed
    rates = [r.tokens_per_s_steps["median"] if r.tokens_per_s_steps else r.tokens_per_s for r in done]
    return {
        "setting": group.label,
        "seeds": f"{len(done)} of {len(group.results)}",
        "val_loss": spread([r.val_loss for r in done if r.val_loss is not None]),
        **_verdict_cells(done),
        "first-token mass": _first_token_mass(done),
        "parameters": f"{done[0].parameters:,}" if done and done[0].parameters else "",
        "cache (bytes a sequence)": _cache(done),
        "tokens/s": spread([float(r) for r in rates if r is not None], 0),
    }


def _verdict_cells(done: list[RunResult]) -> dict[str, str]:
    """How many seeds met the verdict at the end, when they first met it, and its score's spread."""
    met = [float(r.verdict_step) for r in done if r.verdict_step is not None]
    judged = [r.verdict for r in done if r.verdict and r.verdict.get("role")]
    return {
        "verdict met at the end": f"{sum(bool(v['appeared']) for v in judged)} of {len(judged)}" if judged else "n/a",
        "first met at step": spread(met, 0),
        "verdict score": spread([float(v["score"]) for v in judged if v.get("score") is not None], 2),
    }


def _cache(done: list[RunResult]) -> str:
    """The bytes a sequence's cache keeps at full context, summed over the layers (the same for every seed)."""
    sizes = done[0].cache_bytes if done else None
    return f"{sum(layer['bytes'] for layer in sizes['layers']):,}" if sizes else ""


def _first_token_mass(done: list[RunResult]) -> str:
    """Each layer's weight on the first token, its spread over the seeds: `L0 0.41 (0.38 to 0.44) · L1 ...`."""
    masses = [r.first_token_mass for r in done if r.first_token_mass]
    per_layer = [spread([m[layer] for m in masses], 2) for layer in range(min(map(len, masses), default=0))]
    return " · ".join(f"L{layer} {text}" for layer, text in enumerate(per_layer))


def write_groups(sweep_dir: Path, groups: list[Group]) -> list[dict[str, str]]:
    """groups.md and curves_by_setting.png in the sweep dir; returns the rows."""
    rows = [group_row(g) for g in groups]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row[c].replace("|", "\\|") for c in COLUMNS) + " |" for row in rows]
    (sweep_dir / GROUPS).write_text("\n".join(lines) + "\n")
    plot_groups(groups, sweep_dir / GROUPED_CURVES)
    return rows


def _shared_steps(group: Group) -> tuple[list[dict], list[int]]:
    """The train curves of a group's completed seeds (step -> loss), and the steps every one of them has."""
    curves = [dict(r.curves["train"]) for r in group.completed if r.curves and r.curves.get("train")]
    return curves, sorted(set.intersection(*(set(c) for c in curves))) if curves else []


def plot_groups(groups: list[Group], path: Path) -> None:
    """Each setting's train loss against the step: the mean over its seeds, the band from min to max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100, layout="constrained")
    for group in groups:
        curves, steps = _shared_steps(group)
        if not steps:
            continue
        losses = np.array([[c[s] for s in steps] for c in curves])  # (seeds, steps)
        (line,) = ax.plot(steps, losses.mean(axis=0), linewidth=1.4, label=f"{group.label} ({len(curves)} seeds)")
        ax.fill_between(steps, losses.min(axis=0), losses.max(axis=0), color=line.get_color(), alpha=0.15)
    ax.set_title("train loss: mean over seeds, band from min to max", fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.has_data():
        ax.legend(fontsize=8, ncols=2)
    fig.savefig(path)
    plt.close(fig)
