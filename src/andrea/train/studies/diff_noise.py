"""Attention noise (Ye et al. 2025, Differential Transformer): at a retrieval query, differential attention puts
more of its weight on the answer and less on the rest of the context than softmax attention does.

Measured once training ends, on MQAR's validation rows: at each query position, each head of the last layer's
weight on the answer span (the queried key's earlier position and its value's, the next one) and its absolute
weight on every other key (for diff, softmax(Q1K1ᵀ) - λ softmax(Q2K2ᵀ) can be negative: noise either way). The head
with the most weight on the answer is the model's retrieval head; the claims compare it, seed by seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX
from andrea.train.studies.base import UNSURE, Claim, Job, Study, by_setting, judged, net_of

ROWS = 256  # validation rows read


@dataclass
class DiffNoise(Study):
    name = "diff_noise"
    title = "Attention noise: softmax against differential attention (Ye et al. 2025)"
    tasks = ("mqar",)

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        batch = data.probe_batch(ROWS)
        ids, labels = batch["input_ids"], batch["labels"]
        _, weights = net_of(module)(ids, return_weights=True)
        answer, rest = answer_mass(weights[-1].float(), ids, labels != IGNORE_INDEX)  # (H,), (H,)
        best = int(answer.argmax())
        return {"answer": answer.tolist(), "rest": rest.tolist(), "head": best}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        runs = by_setting(jobs, "mechanism.name", "softmax")
        _plot(runs, figure)
        return [_compare(runs, "answer", more=True), _compare(runs, "rest", more=False)]


def answer_mass(weights: Tensor, ids: Tensor, queries: Tensor) -> tuple[Tensor, Tensor]:
    """Per head, the mean over query positions of the weight on the answer span (the first earlier position of
    the query's token and the one after it) and the absolute weight on every other key. weights (B, H, T, T)."""
    B, _, T, _ = weights.shape
    earlier = (ids.unsqueeze(2) == ids.unsqueeze(1)) & torch.ones(T, T, dtype=torch.bool).tril(-1)  # (B, T, T)
    first = earlier.float().argmax(dim=-1)  # (B, T): the first earlier copy of each position's token
    span = torch.zeros(B, T, T, dtype=torch.bool)
    span.scatter_(2, first.unsqueeze(-1), True)
    span.scatter_(2, (first + 1).clamp(max=T - 1).unsqueeze(-1), True)
    at = queries.nonzero(as_tuple=True)  # the query positions: (rows, positions)
    w = weights.permute(0, 2, 1, 3)[at]  # (Q, H, T)
    on_span = span[at].unsqueeze(1)  # (Q, 1, T)
    return (w * on_span).sum(-1).mean(0), (w.abs() * ~on_span).sum(-1).mean(0)


def _head(job: Job, kind: str) -> float:
    final = job.final
    return float(final[kind][final["head"]])


def _compare(runs: dict[str, list[Job]], kind: str, more: bool) -> Claim:
    what = "the answer" if kind == "answer" else "the rest of the context (noise)"
    claim = f"differential attention puts {'more' if more else 'less'} weight on {what} than softmax"
    paper = "Ye et al. Fig. 1: " + (
        "more attention on the answer span" if more else "less attention noise on the context"
    )
    pairs = [
        (s, d) for s in runs.get("softmax", []) for d in runs.get("diff", []) if s.setting("seed") == d.setting("seed")
    ]
    if not pairs:
        return Claim(claim, paper, "no seed completed for both", UNSURE)
    outcomes = [(_head(d, kind) > _head(s, kind)) == more for s, d in pairs]
    values = "; ".join(f"softmax {_head(s, kind):.3f}, diff {_head(d, kind):.3f}" for s, d in pairs)
    ours = f"retrieval head, {sum(outcomes)} of {len(pairs)} seeds: {values}"
    return Claim(claim, paper, ours, judged(outcomes))


def _same_seed(soft: list[Job], diff: list[Job]) -> list[tuple[Job, Job]]:
    return [(s, d) for s in soft for d in diff if s.setting("seed") == d.setting("seed")]


def _plot(runs: dict[str, list[Job]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=100, layout="constrained")
    names = [name for name in ("softmax", "diff") if runs.get(name)]
    for offset, (kind, colour) in enumerate((("answer", "tab:green"), ("rest", "tab:red"))):
        for x, name in enumerate(names):
            values = [_head(job, kind) for job in runs[name]]
            label = ("on the answer span" if kind == "answer" else "on the rest (absolute)") if x == 0 else None
            ax.bar(x + 0.2 * (2 * offset - 1), sum(values) / len(values), width=0.4, color=colour, label=label)
            ax.scatter([x + 0.2 * (2 * offset - 1)] * len(values), values, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(names)), [f"mechanism={n}" for n in names])
    ax.set_title("retrieval head's weight at MQAR's queries (bars: mean over seeds, dots: each)", fontsize=10)
    ax.set_ylabel("weight")
    ax.grid(alpha=0.3, axis="y")
    if ax.has_data():
        ax.legend(fontsize=8)
    fig.savefig(path)
    plt.close(fig)
