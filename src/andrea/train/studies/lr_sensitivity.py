"""LR sensitivity (Wortsman et al. 2023): over a log-spaced grid of learning rates, attention without QK-layernorm
grows large logits and collapses to one-hot weights at high rates; with `mechanism=qknorm` it does not, and the
final loss depends less on the rate.

Every record measures, on the same validation rows: the loss, the largest attention logit (the scaled scores
before the softmax, every layer and head) and how one-hot the weights are (the mean over queries of the largest
weight). The LR sensitivity of a mechanism is Wortsman et al.'s: the mean over the grid of min(final loss, loss at
init) minus the best final loss on the grid (a run that diverged counts as its loss at init).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.lens.cache import run_with_cache
from andrea.train.studies import figure
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, by_setting, net_of, token_losses

ROWS = 16  # validation rows each record reads
GROWTH = 3.0  # softmax's largest logit at the top rate is at least this many times its own at the lowest rate...
BOUNDED = 3.0  # ...and this many times qknorm's at the top rate
ONE_HOT = 0.9  # the mean largest weight counted as collapsed
LOWER = 0.1  # qknorm's sensitivity at least this share below softmax's: holds; within it either way: inconclusive


@dataclass
class LRSensitivity(Study):
    name = "lr_sensitivity"
    title = "LR sensitivity and QK-layernorm (Wortsman et al. 2023)"

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        batch = data.probe_batch(ROWS)
        ids, labels = batch["input_ids"], batch["labels"]
        loss = token_losses(module, ids, labels.clamp(min=0))[labels >= 0].mean()
        _, cache = run_with_cache(net_of(module), ids, names=lambda n: n.endswith(("hook_attn_scores", "hook_pattern")))
        scores = [v for k, v in cache.items() if k.endswith("hook_attn_scores")]
        patterns = [v for k, v in cache.items() if k.endswith("hook_pattern")]
        logit = max(float(s[torch.isfinite(s)].abs().max()) for s in scores)
        one_hot = sum(float(p.amax(dim=-1).mean()) for p in patterns) / len(patterns)
        return {"loss": float(loss), "max_logit": logit, "one_hot": one_hot}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        runs = {
            mechanism: {float(job.setting("model.optimizer.lr")): job for job in grid}
            for mechanism, grid in by_setting(jobs, "mechanism.name", "softmax").items()
        }
        _plot(runs, figure)
        return [_logits(runs), _collapse(runs), _sensitivity(runs)]


def final_loss(job: Job) -> float:
    """The last record's loss, no worse than the loss at init (a diverged run: its loss at init)."""
    losses = job.curve("loss")[1]
    end = losses[-1] if math.isfinite(losses[-1]) else math.inf
    return min(end, losses[0])


def sensitivity(grid: dict[float, Job]) -> float:
    finals = [final_loss(job) for job in grid.values()]
    return sum(finals) / len(finals) - min(finals)


def _peak(job: Job) -> float:
    """The largest attention logit over training."""
    return max((v for v in job.curve("max_logit")[1] if math.isfinite(v)), default=math.inf)


def _logits(runs: dict[str, dict[float, Job]]) -> Claim:
    claim = "without QK-layernorm the largest attention logit grows with the learning rate; with it, it does not"
    paper = (
        "Wortsman et al. §3.1, Fig. 9: without qk-layernorm the attention logits grow with the learning rate; every "
        "run whose logits passed 1e4 diverged"
    )
    soft, qk = runs.get("softmax", {}), runs.get("qknorm", {})
    if len(soft) < 2 or not qk or max(soft) not in qk:
        return Claim(claim, paper, "the grid did not complete", UNSURE)
    low, top = min(soft), max(soft)
    grown, bounded = _peak(soft[top]) / _peak(soft[low]), _peak(soft[top]) / _peak(qk[top])
    ours = (
        f"largest logit at lr {top:g}: softmax {_peak(soft[top]):,.1f} ({grown:,.0f}x its {_peak(soft[low]):.1f} at "
        f"lr {low:g}), qknorm {_peak(qk[top]):,.1f}"
    )
    return Claim(claim, paper, ours, HOLDS if grown >= GROWTH and bounded >= BOUNDED else FAILS)


def _collapse(runs: dict[str, dict[float, Job]]) -> Claim:
    claim = "without QK-layernorm attention collapses to one-hot weights at high learning rates"
    paper = (
        "Wortsman et al. §3.1: attention entropy collapses where the logits grow; Fig. 10: logits held at 1e4 leave a "
        "10M-parameter model worse than a bigram model"
    )
    soft, qk = runs.get("softmax", {}), runs.get("qknorm", {})
    if not soft or not qk:
        return Claim(claim, paper, "the grid did not complete", UNSURE)
    top = max(soft)
    ends = {
        name: grid[top].curve("one_hot")[1][-1] for name, grid in (("softmax", soft), ("qknorm", qk)) if top in grid
    }
    ours = f"mean largest weight at lr {top:g}: " + ", ".join(f"{k} {v:.2f}" for k, v in ends.items())
    collapsed = ends.get("softmax", 0.0) >= ONE_HOT and ends.get("qknorm", 1.0) < ONE_HOT
    return Claim(claim, paper, ours, HOLDS if collapsed else FAILS)


def _sensitivity(runs: dict[str, dict[float, Job]]) -> Claim:
    claim = "QK-layernorm lowers the LR sensitivity"
    paper = (
        "Wortsman et al. Fig. 1: qk-layernorm lowers LR sensitivity at every model size (rates 3e-4 to 3e-1), and "
        "trains a 1.2B model at 0.3"
    )
    soft, qk = runs.get("softmax", {}), runs.get("qknorm", {})
    if not soft or not qk or set(soft) != set(qk):
        return Claim(claim, paper, "the grid did not complete for both", UNSURE)
    s, q = sensitivity(soft), sensitivity(qk)
    ours = f"sensitivity over {len(soft)} rates: softmax {s:.3f}, qknorm {q:.3f}"
    verdict = HOLDS if q <= (1 - LOWER) * s else FAILS if q >= (1 + LOWER) * s else UNSURE
    return Claim(claim, paper, ours, verdict)


def _plot(runs: dict[str, dict[float, Job]], path: Path) -> None:
    fig, axes = figure.panels(3, 13)
    for name, grid in sorted(runs.items()):
        rates = sorted(grid)
        label = f"{name} (sensitivity {sensitivity(grid):.3f})"
        axes[0].plot(rates, [final_loss(grid[r]) for r in rates], marker="o", label=label)
        axes[1].plot(rates, [_peak(grid[r]) for r in rates], marker="o", label=name)
        axes[2].plot(rates, [grid[r].curve("one_hot")[1][-1] for r in rates], marker="o", label=name)
    titles = ("final loss (diverged: loss at init)", "largest attention logit over training", "mean largest weight")
    for ax, title in zip(axes, titles, strict=True):
        ax.set(title=title, xlabel="learning rate", xscale="log")
    axes[1].set_yscale("log")
    figure.save(fig, path)
