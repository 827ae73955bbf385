"""Attention noise (Ye et al. 2025, Differential Transformer): at a retrieval query, differential attention puts
more of its weight on the answer and less on the rest of the context than softmax attention does.

Measured once training ends, on MQAR's validation rows, as Ye et al.'s Table 3 measures a needle's retrieval: at
each query position, each head of the last layer's weight on the answer span (the queried key's earlier position
and its value's, the next one) and on the noise context (every other token of the key-value pairs, the
distractors), each as a share of the row's positive weight. The weights are signed: softmax(Q1K1ᵀ) - λ
softmax(Q2K2ᵀ) puts negative weight where the second map cancels the first, so weight cancelled on the noise
counts against it, not as more noise. A softmax row's positive weight is 1; a differential row's is its part
above zero, never its signed total 1 - λ, which a trained λ can take to 0 (the head's RMSNorm makes the output's
scale free), leaving no share. The head with the most weight on the answer is the model's retrieval head; the
claims compare it, seed by seed.

Preconditions, fixed with the thresholds: both models of a seed retrieve (validation accuracy at least SOLVED),
else the seed's comparison is inconclusive; and there is something to move: softmax's retrieval head has at most
CEILING on the answer (claim 1) and at least FLOOR on the noise context (claim 2), else that claim is
inconclusive for the seed ("holds because nothing happened" is no verdict).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX
from andrea.train.studies import figure
from andrea.train.studies.base import UNSURE, Claim, Job, Study, best_by, by_setting, judged, net_of

ROWS = 256  # validation rows read
SOLVED = 0.9  # validation accuracy counted as retrieving
CEILING = 0.95  # softmax's answer share above which there is no room for more (claim 1)
FLOOR = 0.05  # softmax's noise share below which there is no noise to cancel (claim 2)
TABLE3 = {  # Ye et al. Table 3: 3B models, a needle at 0%, 25%, 50%, 75% and 100% depth of a 4k-token context
    "Transformer": {"answer": (0.03, 0.03, 0.03, 0.07, 0.09), "noise": (0.51, 0.54, 0.52, 0.49, 0.49)},
    "DIFF": {"answer": (0.27, 0.30, 0.31, 0.32, 0.40), "noise": (0.01, 0.02, 0.02, 0.02, 0.01)},
}
PAPER = {
    "answer": "Ye et al. Table 3 (3B, 4k-token needle): Transformer 0.03 to 0.09 on the answer, DIFF 0.27 to 0.40",
    "noise": "Ye et al. Table 3 (3B, 4k-token needle): Transformer 0.49 to 0.54 on the noise, DIFF 0.01 to 0.02",
}


@dataclass
class DiffNoise(Study):
    name = "diff_noise"
    title = "Attention noise: softmax against differential attention (Ye et al. 2025)"
    tasks = ("mqar",)

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        batch = data.probe_batch(ROWS)
        ids, labels = batch["input_ids"], batch["labels"]
        _, weights = net_of(module)(ids, return_weights=True)
        answer, noise = allocation(weights[-1].float(), ids, labels != IGNORE_INDEX, data.num_kv_pairs)
        best = int(answer.argmax())
        return {"answer": answer.tolist(), "noise": noise.tolist(), "head": best}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        best = best_by(jobs, lambda job: (job.setting("mechanism.name", "softmax"), job.setting("seed")))
        runs = by_setting(list(best.values()), "mechanism.name", "softmax")
        _plot(runs, [job for job in jobs if job not in best.values()], figure)
        return [_compare(runs, "answer", more=True), _compare(runs, "noise", more=False)]


def allocation(weights: Tensor, ids: Tensor, queries: Tensor, pairs: int) -> tuple[Tensor, Tensor]:
    """Per head, the mean over query positions of the share of the row's weight on the answer span (the first
    earlier position of the query's token and the one after it) and on the noise context (the other tokens of
    the first 2 * pairs, the key-value pairs). Signed weights over the row's positive weight. weights (B, H, T, T)."""
    B, _, T, _ = weights.shape
    earlier = (ids.unsqueeze(2) == ids.unsqueeze(1)) & torch.ones(T, T, dtype=torch.bool).tril(-1)  # (B, T, T)
    first = earlier.float().argmax(dim=-1)  # (B, T): the first earlier copy of each position's token
    span = torch.zeros(B, T, T, dtype=torch.bool)
    span.scatter_(2, first.unsqueeze(-1), True)
    span.scatter_(2, (first + 1).clamp(max=T - 1).unsqueeze(-1), True)
    context = (torch.arange(T) < 2 * pairs).expand(B, T, T)
    at = queries.nonzero(as_tuple=True)  # the query positions: (rows, positions)
    w = weights.permute(0, 2, 1, 3)[at]  # (Q, H, T)
    total = w.clamp(min=0).sum(-1)  # (Q, H): 1 for softmax, the part above zero for diff
    on_span, on_noise = span[at].unsqueeze(1), (context & ~span)[at].unsqueeze(1)  # (Q, 1, T)
    return ((w * on_span).sum(-1) / total).mean(0), ((w * on_noise).sum(-1) / total).mean(0)


def _head(job: Job, kind: str) -> float:
    final = job.final
    return float(final[kind][final["head"]])


def _outcome(soft: Job, diff: Job, kind: str, more: bool) -> tuple[bool | None, str]:
    """One seed's comparison: (diff moved its weight as claimed, or None where a precondition failed; its words)."""
    seed = f"seed {soft.setting('seed')}"
    rates = f"lr {soft.setting('model.optimizer.lr')} and {diff.setting('model.optimizer.lr')}"
    values = f"softmax {_head(soft, kind):.3f}, diff {_head(diff, kind):.3f} ({rates})"
    accuracy = {"softmax": soft.result.val_acc or 0.0, "diff": diff.result.val_acc or 0.0}
    failed = [f"{name} val acc {acc:.2f}" for name, acc in accuracy.items() if acc < SOLVED]
    if failed:
        return None, f"{seed}: {values} (not judged: {', '.join(failed)} < {SOLVED})"
    if kind == "answer" and _head(soft, kind) > CEILING:
        return None, f"{seed}: {values} (not judged: softmax above {CEILING} already, no room)"
    if kind == "noise" and _head(soft, kind) < FLOOR:
        return None, f"{seed}: {values} (not judged: softmax under {FLOOR}, no noise to cancel)"
    return (_head(diff, kind) > _head(soft, kind)) == more, f"{seed}: {values}"


def _compare(runs: dict[str, list[Job]], kind: str, more: bool) -> Claim:
    what = "the answer span" if kind == "answer" else "the noise context (the other pairs)"
    claim = f"differential attention puts {'more' if more else 'less'} of its weight on {what} than softmax"
    pairs = _same_seed(runs.get("softmax", []), runs.get("diff", []))
    if not pairs:
        return Claim(claim, PAPER[kind], "no seed completed for both", UNSURE)
    seen = [_outcome(s, d, kind, more) for s, d in pairs]
    decided = [outcome for outcome, _ in seen if outcome is not None]
    ours = f"retrieval head, as claimed in {sum(decided)} of {len(decided)} judged seeds: "
    ours += "; ".join(words for _, words in seen)
    return Claim(claim, PAPER[kind], ours, judged(decided) if decided else UNSURE)


def _same_seed(soft: list[Job], diff: list[Job]) -> list[tuple[Job, Job]]:
    return [(s, d) for s in soft for d in diff if s.setting("seed") == d.setting("seed")]


KINDS = (("answer", "tab:green", "answer span"), ("noise", "tab:red", "noise context"))  # what each bar shows


def _plot(runs: dict[str, list[Job]], others: list[Job], path: Path) -> None:
    """Ye et al.'s Fig. 1 drawn twice: the share on the answer and on the noise context, by mechanism; ours (bars
    the mean over seeds of each seed's best rate, black dots those, faint dots the other rates: the spread over
    the grid) beside the paper's Table 3 (the mean over its five depths)."""
    fig, (ours_ax, paper_ax) = figure.panels(2, 10)
    _draw_ours(ours_ax, runs, by_setting(others, "mechanism.name", "softmax"))
    for offset, (kind, colour, _) in enumerate(KINDS):
        published = [sum(TABLE3[model][kind]) / len(TABLE3[model][kind]) for model in TABLE3]
        paper_ax.bar([i + 0.2 * (2 * offset - 1) for i in range(len(TABLE3))], published, width=0.4, color=colour)
    paper_ax.set_xticks(range(len(TABLE3)), list(TABLE3))
    paper_ax.set_title("Ye et al. Table 3: 3B models, 4k-token needle, 5 depths' mean", fontsize=10)
    paper_ax.set_ylim(0, 1)
    figure.save(fig, path, grid="y")


def _draw_ours(ax: Any, runs: dict[str, list[Job]], others: dict[str, list[Job]]) -> None:
    """The retrieval heads' shares by mechanism: a bar the mean over seeds, a dot each seed, a faint dot each run
    at another rate."""
    names = [name for name in ("softmax", "diff") if runs.get(name)]
    for offset, (kind, colour, label) in enumerate(KINDS):
        x = [i + 0.2 * (2 * offset - 1) for i in range(len(names))]
        _bars(ax, x, [[_head(job, kind) for job in runs[name]] for name in names], colour, label)
        for xi, name in zip(x, names, strict=True):
            spread = [_head(job, kind) for job in others.get(name, [])]
            ax.scatter([xi + 0.08] * len(spread), spread, color="grey", alpha=0.4, s=10, zorder=3)
    ax.set_xticks(range(len(names)), [f"mechanism={n}" for n in names])
    ax.set_title("here: MQAR's queries, the retrieval head", fontsize=10)
    ax.set_ylabel("share of the row's positive weight")


def _bars(ax: Any, x: list[float], seeds: list[list[float]], colour: str, label: str) -> None:
    """At each x a bar of the seeds' mean and a dot for each seed."""
    ax.bar(x, [sum(values) / len(values) for values in seeds], width=0.4, color=colour, label=label)
    for xi, values in zip(x, seeds, strict=True):
        ax.scatter([xi] * len(values), values, color="black", s=10, zorder=3)
