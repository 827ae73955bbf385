"""A sweep's jobs grouped over seeds: jobs that differ only in `seed` are one setting, shown as the
mean and range of its seeds (groups.md, curves_by_setting.png, and a table in report.html).

Each setting's row: how many of its seeds completed, the val loss (mean, min to max), how many seeds meet the
task's verdict at the end, the step at which it was first met (the first attention-maps record that met it,
over the seeds that met it at all), the best head's score for the verdict's role at the end, the first-token (sink)
mass per layer (andrea.lens.head_roles.first_token_mass), parameters, the bytes one sequence's cache keeps at
full context (a KV cache grows with it, a recurrent state does not), tokens/s and tokens per second of CPU time.

`report.best_over=[model.optimizer.lr]` makes each point the best run over a nuisance axis, as Zoology and MAD
plot them: jobs that differ only in those keys (and the seed) are one setting, and of each seed's runs the best
(the highest val accuracy, else the lowest val loss) stands for it. A first-met step carries the cadence of the
records it was read from (`96 ±16`), and settings whose first-met steps lie within it are named as tied.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
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
    "first-token mass", "parameters", "cache (bytes a sequence)", "tokens/s", "tokens/CPU s",
]  # fmt: skip


@dataclass
class Group:
    """One setting: its label (the overrides that differ, seed aside) and its jobs' results (with best_over, the
    best of each seed's)."""

    label: str
    results: list[RunResult]

    @property
    def completed(self) -> list[RunResult]:
        return [r for r in self.results if r.status == "completed"]


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def seed_groups(results: list[RunResult], best_over: Sequence[str] = ()) -> list[Group]:
    """The jobs grouped by their overrides without `seed` (and the `best_over` keys), in the order each setting
    first appears; [] when no two jobs share a setting (nothing to group)."""
    nuisance = {SEED, *best_over}
    unseeded = [[o for o in r.overrides if _key(o) not in nuisance] for r in results]
    labels = differing_overrides(unseeded)
    groups: dict[str, Group] = {}
    for label, result in zip(labels, results, strict=True):
        groups.setdefault(label, Group(label, [])).results.append(result)
    if len(groups) == len(results):
        return []
    if best_over:
        for group in groups.values():
            compared = len(group.results)
            group.results = _best_of_each_seed(group.results)
            group.label += f" (best of {compared // len(group.results)} over {', '.join(best_over)})"
    return list(groups.values())


def _best_of_each_seed(results: list[RunResult]) -> list[RunResult]:
    """Each seed's best run: completed first, then the highest val accuracy, then the lowest val loss."""
    by_seed: dict[str, list[RunResult]] = {}
    for result in results:
        seed = next((o.partition("=")[2] for o in result.overrides if _key(o) == SEED), "")
        by_seed.setdefault(seed, []).append(result)

    return [max(runs, key=standing) for runs in by_seed.values()]


def standing(result: RunResult) -> tuple:
    """How runs compare when the best stands for them: completed first, then the highest val accuracy, then the
    lowest val loss (max() picks the best)."""
    return (result.status == "completed", result.val_acc if result.val_acc is not None else -1.0,
            -(result.val_loss or math.inf))  # fmt: skip


def spread(values: list[float], digits: int = 3) -> str:
    """`mean (min to max)` of a setting's seeds, or the one value, or blank."""
    if not values:
        return ""
    mean = f"{statistics.fmean(values):,.{digits}f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):,.{digits}f} to {max(values):,.{digits}f})"


def group_row(group: Group) -> dict[str, str]:
    done = group.completed
    return {
        "setting": group.label,
        "seeds": f"{len(done)} of {len(group.results)}",
        "val_loss": spread([r.val_loss for r in done if r.val_loss is not None]),
        **_verdict_cells(done),
        "first-token mass": _first_token_mass(done),
        "parameters": f"{done[0].parameters:,}" if done and done[0].parameters else "",
        "cache (bytes a sequence)": _cache(done),
        **_speed_cells(done),
    }


def _speed_cells(done: list[RunResult]) -> dict[str, str]:
    """Tokens per second of wall time (the median over the steps) and of the process's CPU time."""
    rates = [r.tokens_per_s_steps["median"] if r.tokens_per_s_steps else r.tokens_per_s for r in done]
    return {
        "tokens/s": spread([float(r) for r in rates if r is not None], 0),
        "tokens/CPU s": spread([r.tokens_per_cpu_s for r in done if r.tokens_per_cpu_s is not None], 0),
    }


def _verdict_cells(done: list[RunResult]) -> dict[str, str]:
    """How many seeds met the verdict at the end, when they first met it, and its score's spread."""
    judged = [r.verdict for r in done if r.verdict and r.verdict.get("role")]
    return {
        "verdict met at the end": f"{sum(bool(v['appeared']) for v in judged)} of {len(judged)}" if judged else "n/a",
        "first met at step": _first_met(done),
        "verdict score": spread([float(v["score"]) for v in judged if v.get("score") is not None], 2),
    }


def _first_met(done: list[RunResult]) -> str:
    """The steps the seeds first met the verdict at, and the records' cadence: `80 (64 to 96) ±16`."""
    met = [r for r in done if r.verdict_step is not None]
    if not met:
        return ""
    cadence = max(r.verdict_cadence or 0 for r in met)
    return spread([float(r.verdict_step or 0) for r in met], 0) + (f" ±{cadence}" if cadence else "")


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
    lines += ["", tie] if (tie := ties(groups)) else []
    (sweep_dir / GROUPS).write_text("\n".join(lines) + "\n")
    plot_groups(groups, sweep_dir / GROUPED_CURVES)
    return rows


def ties(groups: list[Group]) -> str:
    """A line naming the settings whose mean first-met steps lie within the records' cadence of the earliest, or ''."""
    firsts = {group.label: first for group in groups if (first := _first_step(group)) is not None}
    if len(firsts) < 2:
        return ""
    earliest = min(step for step, _ in firsts.values())
    tied = [label for label, (step, cadence) in firsts.items() if step - earliest <= cadence]
    if len(tied) < 2:
        return ""
    return f"Tied for the earliest verdict (first met within one record of each other): {', '.join(tied)}."


def _first_step(group: Group) -> tuple[float, int] | None:
    """The mean step a setting's seeds first met the verdict at, and the cadence; None if none met it."""
    met = [r for r in group.completed if r.verdict_step is not None]
    if not met:
        return None
    return statistics.fmean(r.verdict_step or 0 for r in met), max(r.verdict_cadence or 0 for r in met)


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
