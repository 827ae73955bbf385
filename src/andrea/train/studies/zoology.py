"""Zoology (Arora et al. 2023): MQAR accuracy against model width and against recurrent state size. Claims:
attention solves MQAR at every width; a fixed-state mixer needs a state that grows with the number of pairs it
recalls; the delta rule recalls more per unit of state than gated linear attention.

Each point is the best of the sweep's learning rates (Zoology plots the best of four; the others are drawn faint,
the spread over the grid), read from result.json: accuracy on the validation rows of each pair count trained on
(val: the task's own, 4 pairs; `data.eval_sets` pairs_8, pairs_16), and the state as Zoology counts it
(`state_size()` summed over the layers, times 4 bytes): an attention layer's keys and values at the sequence's
length, a recurrent layer's state, short convolutions left out (result.json's bytes less their conv_bytes).

A claim about fixed-state mixers rests on the mixer having learned the task at all (at least SOLVED on the pairs
it recalls most easily, 4, at its smallest width) and on its smallest state falling short of the 16 pairs (under
SOLVED there): one that learned nothing, or lacks nothing, says nothing about state, and is inconclusive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andrea.train.studies import figure
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, best_by

SOLVED = 0.9  # accuracy counted as solving MQAR (Zoology: attention near 1.0)
APART = 0.05  # accuracy differences smaller than this are ties
PAIRS = {"val": 4, "pairs_8": 8, "pairs_16": 16}  # each scored set and its pairs (the task's own: val)
MOST = "pairs_16"  # the set with the most pairs
ZOOLOGY_FIG2 = "Zoology Fig. 2 (read off the plot): attention 0.97 to 1.0 at every width (64-512) and length (64-512)"


@dataclass
class Zoology(Study):
    name = "zoology"
    title = "MQAR against width and state size (Zoology: Arora et al. 2023)"
    tasks = ("mqar",)

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        points = best_points(jobs)
        _plot(points, [point_of(job) for job in jobs], figure)
        return [_attention(points), _state(points), _delta(points)]


@dataclass(frozen=True)
class Point:
    mixer: str
    width: int
    lr: float
    state: int  # bytes of state, every layer, as Zoology counts it
    acc: dict[str, float]  # "val" (4 pairs) and each evaluation set

    def learned(self) -> bool:
        """Whether the run learned MQAR at all: SOLVED on the fewest pairs."""
        return self.acc["val"] >= SOLVED


def mixer_of(job: Job) -> str:
    layout = job.setting("model.net.layout")
    return "+".join(layout) if layout else str(job.setting("mixer.name", "attention"))


def best_points(jobs: list[Job]) -> dict[str, list[Point]]:
    """Per mixer, a point per width: its best run over the learning rates, by the rule the sweep report's
    best_over uses (andrea.train.sweep_groups.standing)."""
    best = best_by(jobs, lambda job: (mixer_of(job), int(job.setting("model.net.d_model"))))
    points: dict[str, list[Point]] = defaultdict(list)
    for _, job in sorted(best.items()):
        points[mixer_of(job)].append(point_of(job))
    return points


def point_of(job: Job) -> Point:
    sizes = job.result.cache_bytes or {"layers": []}
    acc = {"val": job.result.val_acc or 0.0} | {k: v["acc"] for k, v in (job.result.eval_sets or {}).items()}
    state = sum(layer["bytes"] - layer.get("conv_bytes", 0) for layer in sizes["layers"])
    width = int(job.setting("model.net.d_model"))
    return Point(mixer_of(job), width, float(job.setting("model.optimizer.lr")), state, acc)


def _attention(points: dict[str, list[Point]]) -> Claim:
    claim = "attention solves MQAR at every width"
    found = points.get("attention", [])
    if not found:
        return Claim(claim, ZOOLOGY_FIG2, "no attention run completed", UNSURE)
    ours = "; ".join(f"d {p.width}: " + ", ".join(f"{p.acc.get(k, 0):.3f}" for k in PAIRS) for p in found)
    solved = all(p.acc.get(k, 0.0) >= SOLVED for p in found for k in PAIRS)
    return Claim(claim, ZOOLOGY_FIG2, f"{ours} (4, 8, 16 pairs)", HOLDS if solved else FAILS)


def _state(points: dict[str, list[Point]]) -> Claim:
    claim = (
        "a fixed-state mixer needs state that grows with the pairs: more pairs cost accuracy that more state wins back"
    )
    paper = (
        "Zoology Fig. 2 at T 256, 16 pairs: gated convolutions 0.05 to 0.14 at d_model 64, 0.67 to 0.92 at 512; "
        "Based Fig. 2: Based 0.54 at its least state, 1.0 from about 2^17 bytes (read off the plots)"
    )
    fixed = _fixed(points)
    if not fixed:
        return Claim(claim, paper, "no fixed-state mixer ran at two widths with the 16-pair set", UNSURE)
    reasons = {mixer: _why_not(ps) for mixer, ps in fixed.items()}
    judged = {mixer: _grows(ps) for mixer, ps in fixed.items() if reasons[mixer] is None}
    outcomes = [outcome for outcome, _ in judged.values()]
    parts = [f"{mixer} {text}" for mixer, (_, text) in judged.items()]
    parts += [f"{mixer} not judged: {why}" for mixer, why in reasons.items() if why]
    return Claim(claim, paper, f"{sum(outcomes)} of {len(fixed)} mixers: " + "; ".join(parts), _of(outcomes, fixed))


def _fixed(points: dict[str, list[Point]]) -> dict[str, list[Point]]:
    """The fixed-state mixers the claim can read: at two widths or more, scored at 16 pairs."""
    return {m: ps for m, ps in points.items() if m != "attention" and len(ps) >= 2 and MOST in ps[0].acc}


def _of(outcomes: list[bool], fixed: dict[str, list[Point]]) -> str:
    """The verdict: holds where every mixer learned the task and showed the claim, does not hold where none that
    learned it did; inconclusive otherwise (a mixer that learned nothing says nothing about its state)."""
    if outcomes and all(outcomes) and len(outcomes) == len(fixed):
        return HOLDS
    return FAILS if outcomes and not any(outcomes) else UNSURE


def _why_not(ps: list[Point]) -> str | None:
    """Why a mixer's points say nothing about its state, if they do not: at its smallest width it learned nothing,
    or it recalls the 16 pairs already (no limit for more state to lift)."""
    small = ps[0]
    if not small.learned():
        return f"learned nothing at d {small.width} ({small.acc['val']:.2f} at 4 pairs)"
    if small.acc[MOST] >= SOLVED:
        return f"recalls 16 pairs at d {small.width} already ({small.acc[MOST]:.2f}): no limit to see"
    return None


def _grows(ps: list[Point]) -> tuple[bool, str]:
    """One mixer's points, smallest width first: whether 16 pairs cost accuracy at the smallest state and the
    largest won it back, and what was seen."""
    small, large = ps[0], ps[-1]
    costs = small.acc["val"] - small.acc[MOST] >= APART
    wins = large.acc[MOST] - small.acc[MOST] >= APART
    seen = (
        f"{small.acc['val']:.2f} -> {small.acc[MOST]:.2f} at 16 pairs ({small.state:,} B), "
        f"{large.acc[MOST]:.2f} at {large.state:,} B"
    )
    return costs and wins, seen


def _delta(points: dict[str, list[Point]]) -> Claim:
    claim = "the delta rule recalls more per unit of state than gated linear attention"
    paper = "Yang et al. 2024 Fig. 4 (T 512, 64 pairs): DeltaNet 'performs perfectly' in the hardest setting (a plot)"
    delta, gla = points.get("deltanet", []), points.get("gla", [])
    key = MOST if all(MOST in p.acc for p in delta + gla) else "val"
    pairs = _matched(delta, gla, key)
    reason = _unjudged(pairs, delta + gla)
    if reason:
        return Claim(claim, paper, reason, UNSURE)
    more = [d.acc[key] - g.acc[key] >= APART for d, g in pairs]
    less = [g.acc[key] - d.acc[key] >= APART for d, g in pairs]
    ours = (
        "; ".join(_against(d, g, key) for d, g in pairs) + f", at {'16 pairs' if key == MOST else 'the trained pairs'}"
    )
    return Claim(claim, paper, ours, HOLDS if all(more) else FAILS if all(less) else UNSURE)


def _unjudged(pairs: list[tuple[Point, Point]], points: list[Point]) -> str | None:
    """Why DeltaNet and GLA cannot be compared, if they cannot: no matched state, or neither learned the task."""
    if not pairs:
        return "no GLA point has as much state as a DeltaNet point"
    if not any(p.learned() for p in points):
        return "neither DeltaNet nor GLA learned MQAR at 4 pairs: nothing to compare"
    return None


def _against(d: Point, g: Point, key: str) -> str:
    ours = f"deltanet d {d.width} {d.acc[key]:.2f} ({d.state:,} B)"
    return f"{ours} against gla d {g.width} {g.acc[key]:.2f} ({g.state:,} B)"


def _matched(delta: list[Point], gla: list[Point], key: str) -> list[tuple[Point, Point]]:
    """Each DeltaNet point against GLA's best point with at least as much state (where GLA has one)."""
    pairs = []
    for d in delta:
        larger = [g for g in gla if g.state >= d.state]
        if larger:
            pairs.append((d, max(larger, key=lambda g: g.acc[key])))
    return pairs


def _plot(points: dict[str, list[Point]], every: list[Point], path: Path) -> None:
    """Zoology's Fig. 2 as this run trains it (accuracy against width, a panel per pair count, all at the one
    length), and Based's state panel (accuracy at 16 pairs against the state, log scale): each mixer's best rate
    joined, its other rates faint dots."""
    fig, axes = figure.panels(4, 17, 4)
    colours = {mixer: f"C{i}" for i, mixer in enumerate(sorted(points))}
    for mixer, ps in sorted(points.items()):
        look = {"color": colours[mixer], "marker": "o", "linestyle": "--" if mixer == "attention" else "-"}
        for ax, (xs, ys) in zip(axes, _panels(ps), strict=True):
            ax.plot(xs, ys, label=mixer, **look)
    _spread(axes, colours, every)
    _label(axes, sorted({p.width for ps in points.values() for p in ps}))
    figure.save(fig, path)


def _spread(axes: list[Any], colours: dict[str, str], every: list[Point]) -> None:
    """Every run of the grid, a faint dot in its mixer's colour: the spread over the learning rates."""
    for p in (p for p in every if p.mixer in colours):
        for ax, (xs, ys) in zip(axes, _panels([p]), strict=True):
            ax.scatter(xs, ys, color=colours[p.mixer], alpha=0.25, s=12)


def _label(axes: list[Any], widths: list[int]) -> None:
    for ax, pairs in zip(axes, PAIRS.values(), strict=False):
        ax.set(title=f"T = 64, {pairs} pairs", xlabel="d_model", xscale="log")
        ax.set_xticks(widths, [str(w) for w in widths], minor=False)
        ax.minorticks_off()
    axes[3].set(title="16 pairs against state (Based)", xlabel="state, bytes (Zoology's count)", xscale="log")
    for ax in axes:
        ax.set(ylim=(-0.02, 1.02), ylabel="accuracy (best rate; faint: the others)")


def _panels(ps: list[Point]) -> list[tuple[list[float], list[float]]]:
    """Points' (x, y) on each panel: accuracy against width at 4, 8 and 16 pairs, and at 16 pairs against state."""
    nan = float("nan")
    by_width = [([float(p.width) for p in ps], [p.acc.get(key, nan) for p in ps]) for key in PAIRS]
    return [*by_width, ([float(p.state) for p in ps], [p.acc.get(MOST, nan) for p in ps])]
