"""The induction bump (Olsson et al. 2022): in a 2-layer attention-only model the in-context score (the loss at a
late token minus the loss at an early one) drops abruptly when an induction head forms; a 1-layer model, which
cannot form one, shows no such drop.

Every record measures, on the same validation rows of repeated random blocks: the in-context score at the
positions Olsson et al. use, scaled to the context (500 and 50 of 512; its preset scores every token in training,
as a language model's loss does, so the early term is a loss the model learns), and each head's prefix-matching score
(its weight on the key after an earlier copy of the query's token: TransformerLens's induction detector,
andrea.lens.head_roles.InductionScore). A claim is judged in each seed and holds where it holds in every seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.lens.head_roles import InductionScore
from andrea.train.studies import figure
from andrea.train.studies.base import UNSURE, Claim, Job, Study, by_setting, judged, net_of, token_losses

ROWS = 256  # validation rows each record reads
NEAR = 2  # records: the steepest drop of the score and the steepest rise of the head "coincide" within this many
FAR = 1.0  # nats: the 2-layer model ends at least this much lower than the 1-layer control, and than its own start
FLAT = 1 / 3  # the control's steepest drop is at most this share of the 2-layer model's


@dataclass
class InductionBump(Study):
    name = "induction_bump"
    title = "The induction bump (Olsson et al. 2022)"
    tasks = ("induction",)

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        batch = data.probe_batch(ROWS)
        ids, labels = batch["input_ids"], batch["labels"]
        targets = torch.cat((ids[:, 1:], labels[:, -1:]), dim=1)  # the next id everywhere, seen or not
        T = ids.shape[1]
        early, late = round(T * 50 / 512), min(T - 1, round(T * 500 / 512))
        losses = token_losses(module, ids, targets).mean(dim=0)
        _, weights = net_of(module)(ids, return_weights=True)
        scores = InductionScore(len(weights), weights[0].shape[1])
        scores.update(list(weights), ids)
        return {"in_context": float(losses[late] - losses[early]), "prefix_matching": float(scores.compute().max())}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        by_layers = by_setting(jobs, "model.net.n_layer")
        two, one = by_layers.get(2, []), by_layers.get(1, [])
        _plot(two, one, figure)
        return [_bump(two), _control(two, one)]


def _steepest(job: Job, name: str, rise: bool) -> tuple[int, float]:
    """(record index, change) of the largest drop (or rise) between consecutive records of `name`."""
    values = job.curve(name)[1]
    changes = [b - a if rise else a - b for a, b in zip(values, values[1:], strict=False)]
    index = max(range(len(changes)), key=changes.__getitem__)
    return index + 1, changes[index]


def _bump(two: list[Job]) -> Claim:
    claim = "the in-context score drops abruptly when an induction head forms (2 attention-only layers)"
    paper = (
        "Olsson et al. Argument 1: the in-context score (loss at token 500 less at 50) moves from under 0.15 to about "
        "0.4 nats within 2.5 to 5 billion tokens, as induction heads appear"
    )
    if not two:
        return Claim(claim, paper, "no 2-layer run completed", UNSURE)
    parts, outcomes = [], []
    for job in two:
        steps, score = job.curve("in_context")
        (drop, size), (rise, _) = _steepest(job, "in_context", rise=False), _steepest(job, "prefix_matching", True)
        head = job.curve("prefix_matching")[1][-1]
        outcomes.append(abs(drop - rise) <= NEAR and score[0] - score[-1] >= FAR)
        parts.append(
            f"drop of {size:.2f} at step {steps[drop]}, head's steepest rise at {steps[rise]} (ends {head:.2f})"
        )
    return Claim(claim, paper, f"{sum(outcomes)} of {len(two)} seeds: " + "; ".join(parts), judged(outcomes))


def _control(two: list[Job], one: list[Job]) -> Claim:
    claim = "a 1-layer attention-only model shows no such drop"
    paper = "Olsson et al. Argument 1: only the 1-layer models have no such change (the others reach about 0.4 nats)"
    if not two or not one:
        return Claim(claim, paper, "a 1- or 2-layer run did not complete", UNSURE)
    outcomes, parts = [], []
    seeds = {job.setting("seed"): job for job in two}
    for control, model in ((c, seeds[c.setting("seed")]) for c in one if c.setting("seed") in seeds):
        drop, model_drop = (
            _steepest(control, "in_context", rise=False)[1],
            _steepest(model, "in_context", rise=False)[1],
        )
        end, model_end = control.curve("in_context")[1][-1], model.curve("in_context")[1][-1]
        outcomes.append(drop <= FLAT * model_drop and end - model_end >= FAR)
        parts.append(f"ends at {end:.2f} against {model_end:.2f}, steepest drop {drop:.2f}")
    return Claim(claim, paper, f"{sum(outcomes)} of {len(outcomes)} seeds: " + "; ".join(parts), judged(outcomes))


def _plot(two: list[Job], one: list[Job], path: Path) -> None:
    fig, axes = figure.panels(3, 13)
    for jobs, colour, name in ((two, "tab:blue", "2 layers"), (one, "tab:orange", "1 layer (control)")):
        for n, job in enumerate(jobs):
            label = name if n == 0 else None
            axes[0].plot(*job.curve("in_context"), color=colour, alpha=0.8, label=label)
            axes[1].plot(*job.curve("prefix_matching"), color=colour, alpha=0.8, label=label)
            if job.result.curves and job.result.curves.get("train"):
                axes[2].plot(*zip(*job.result.curves["train"], strict=True), color=colour, alpha=0.6, label=label)
    titles = ("in-context score (late minus early loss)", "best head's prefix-matching score", "train loss")
    for ax, title in zip(axes, titles, strict=True):
        ax.set(title=title, xlabel="step")
    figure.save(fig, path)
