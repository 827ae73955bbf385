"""Zoology (Arora et al. 2023): MQAR accuracy against model width and against recurrent state size. Claims:
attention solves MQAR at every width; a fixed-state mixer needs a state that grows with the number of pairs it
recalls; the delta rule recalls more per unit of state than gated linear attention.

Each point is the best of the sweep's learning rates (Zoology plots the best of four), read from result.json:
accuracy on the validation rows (the pairs trained on) and on evaluation sets of the same length with more pairs
(`data.eval_sets`: pairs_8, pairs_16), and the bytes a sequence's cache keeps (the KV cache at full context for
attention, the state for the others).
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
MOST = "pairs_16"  # the evaluation set with the most pairs


@dataclass
class Zoology(Study):
    name = "zoology"
    title = "MQAR against width and state size (Zoology: Arora et al. 2023)"
    tasks = ("mqar",)

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        points = best_points(jobs)
        _plot(points, figure)
        return [_attention(points), _state(points), _delta(points)]


@dataclass(frozen=True)
class Point:
    mixer: str
    width: int
    lr: float
    state: int  # bytes a sequence's cache keeps, every layer
    acc: dict[str, float]  # "val" (the pairs trained on) and each evaluation set


def mixer_of(job: Job) -> str:
    layout = job.setting("model.net.layout")
    return "+".join(layout) if layout else str(job.setting("mixer.name", "attention"))


def best_points(jobs: list[Job]) -> dict[str, list[Point]]:
    """Per mixer, a point per width: its best run over the learning rates, by the rule the sweep report's
    best_over uses (andrea.train.sweep_groups.standing)."""
    best = best_by(jobs, lambda job: (mixer_of(job), int(job.setting("model.net.d_model"))))
    points: dict[str, list[Point]] = defaultdict(list)
    for (mixer, width), job in sorted(best.items()):
        points[mixer].append(_point(mixer, width, job))
    return points


def _point(mixer: str, width: int, job: Job) -> Point:
    sizes = job.result.cache_bytes or {"layers": []}
    acc = {"val": job.result.val_acc or 0.0} | {k: v["acc"] for k, v in (job.result.eval_sets or {}).items()}
    state = sum(layer["bytes"] for layer in sizes["layers"])
    return Point(mixer, width, float(job.setting("model.optimizer.lr")), state, acc)


def _attention(points: dict[str, list[Point]]) -> Claim:
    claim = "attention solves MQAR at every width"
    paper = "Zoology Fig. 2: attention near 100% at every width and length"
    found = points.get("attention", [])
    if not found:
        return Claim(claim, paper, "no attention run completed", UNSURE)
    ours = ", ".join(f"d {p.width}: {p.acc['val']:.3f}" for p in found)
    return Claim(claim, paper, ours, HOLDS if all(p.acc["val"] >= SOLVED for p in found) else FAILS)


def _state(points: dict[str, list[Point]]) -> Claim:
    claim = (
        "a fixed-state mixer needs state that grows with the pairs: more pairs cost accuracy that more state wins back"
    )
    paper = "Zoology Fig. 2 & Based Fig. 3: gated convolutions and linear attention need width growing with the pairs"
    fixed = {m: ps for m, ps in points.items() if m != "attention" and len(ps) >= 2 and MOST in ps[0].acc}
    if not fixed:
        return Claim(claim, paper, "no fixed-state mixer ran at two widths with the 16-pair set", UNSURE)
    outcomes, parts = [], []
    for mixer, ps in fixed.items():
        small, large = ps[0], ps[-1]
        costs = small.acc["val"] - small.acc[MOST] >= APART
        wins = large.acc[MOST] - small.acc[MOST] >= APART
        outcomes.append(costs and wins)
        parts.append(
            f"{mixer} {small.acc['val']:.2f} -> {small.acc[MOST]:.2f} at 16 pairs ({small.state:,} B), "
            f"{large.acc[MOST]:.2f} at {large.state:,} B"
        )
    verdict = HOLDS if all(outcomes) else FAILS if not any(outcomes) else UNSURE
    return Claim(claim, paper, f"{sum(outcomes)} of {len(outcomes)} mixers: " + "; ".join(parts), verdict)


def _delta(points: dict[str, list[Point]]) -> Claim:
    claim = "the delta rule recalls more per unit of state than gated linear attention"
    paper = "Yang et al. 2024 (DeltaNet): on MQAR the delta rule recalls more than linear attention and GLA"
    delta, gla = points.get("deltanet", []), points.get("gla", [])
    key = MOST if all(MOST in p.acc for p in delta + gla) else "val"
    pairs = _matched(delta, gla, key)
    if not pairs:
        return Claim(claim, paper, "no GLA point has as much state as a DeltaNet point", UNSURE)
    more = [d.acc[key] - g.acc[key] >= APART for d, g in pairs]
    less = [g.acc[key] - d.acc[key] >= APART for d, g in pairs]
    ours = (
        "; ".join(_against(d, g, key) for d, g in pairs) + f", at {'16 pairs' if key == MOST else 'the trained pairs'}"
    )
    return Claim(claim, paper, ours, HOLDS if all(more) else FAILS if all(less) else UNSURE)


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


def _draw(axes: Any, mixer: str, ps: list[Point]) -> None:
    """One mixer's points on the three panels (the third where it has the 16-pair set)."""
    style = {"marker": "o", "label": mixer, "linestyle": "--" if mixer == "attention" else "-"}
    axes[0].plot([p.width for p in ps], [p.acc["val"] for p in ps], **style)
    axes[1].plot([p.state for p in ps], [p.acc["val"] for p in ps], **style)
    if all(MOST in p.acc for p in ps):
        axes[2].plot([p.state for p in ps], [p.acc[MOST] for p in ps], **style)


def _plot(points: dict[str, list[Point]], path: Path) -> None:
    fig, axes = figure.panels(3, 14, 4)
    for mixer, ps in sorted(points.items()):
        _draw(axes, mixer, ps)
    titles = ("against width (4 pairs, as trained)", "against state size (4 pairs)", "against state size (16 pairs)")
    for ax, title, x in zip(
        axes, titles, ("d_model", "bytes a sequence's cache keeps", "bytes a sequence's cache keeps"), strict=True
    ):
        ax.set(title=f"accuracy {title}", xlabel=x, xscale="log", ylim=(-0.02, 1.02), ylabel="accuracy (best rate)")
    widths = sorted({p.width for ps in points.values() for p in ps})
    axes[0].set_xticks(widths, [str(w) for w in widths], minor=False)
    axes[0].minorticks_off()
    figure.save(fig, path)
