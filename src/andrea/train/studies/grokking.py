"""Grokking (Power et al. 2022; Nanda et al. 2023): a + b mod p, trained on part of the pairs with strong weight
decay. Claims: test accuracy rises long after train accuracy reaches 100%, and the trained model reads the numbers
through a few key frequencies (its token embedding is sparse in the Fourier basis over 0..p-1).

Every record measures accuracy on every training pair and every held-out pair (full batches, as the run trains)
and how much of the embedding's Fourier energy its KEY strongest frequencies hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX
from andrea.train.studies import figure
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, first_reaching, logits

KEY = 5  # frequencies counted as "a few" (Nanda et al. find five for p = 113)
LEARNED = 0.99  # accuracy counted as learned
LATE = 3.0  # "long after": test accuracy learned at least this many times later than train accuracy
SPARSE = 0.5  # the KEY frequencies hold at least this share of the embedding's energy...
SHARPER = 2.0  # ...and at least this many times their share at initialisation
PHASES = ((1400, "memorised"), (9400, "circuit formed"), (13300, "cleaned up"))  # Nanda et al. §5.1's phase ends


@dataclass
class Grokking(Study):
    name = "grokking"
    title = "Grokking (Power et al. 2022; Nanda et al. 2023)"
    tasks = ("modular_addition",)

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        train, test = data.train_set, data.val_set
        return {
            "train_acc": _accuracy(module, train.input_ids, train.labels),
            "test_acc": _accuracy(module, test.input_ids, test.labels),
            "key_share": key_share(spectrum(_embedding(module), data.p)),
        }

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        return {"spectrum": spectrum(_embedding(module), data.p).tolist(), "p": data.p}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        job = jobs[0] if jobs else None
        _plot(job, figure)
        return [_late(job), _sparse(job)]


def spectrum(embedding: Tensor, p: int) -> Tensor:
    """(p // 2,) the embedding's energy at each frequency k = 1..p//2 of the Fourier basis over tokens 0..p-1
    (cos and sin together; the constant k = 0 left out), each as a share of the whole."""
    coefficients = torch.fft.rfft(embedding[:p].double(), dim=0)  # (p // 2 + 1, d)
    energy = coefficients[1 : p // 2 + 1].abs().pow(2).sum(dim=-1)
    return (energy / energy.sum()).float()


def key_share(shares: Tensor) -> float:
    return float(shares.topk(min(KEY, shares.numel())).values.sum())


def _embedding(module: torch.nn.Module) -> Tensor:
    return module.get_parameter("net.embed.token.weight").detach()


def _accuracy(module: torch.nn.Module, ids: Tensor, labels: Tensor) -> float:
    scored = labels != IGNORE_INDEX
    return float((logits(module, ids).argmax(dim=-1)[scored] == labels[scored]).float().mean())


def _late(job: Job | None) -> Claim:
    claim = "test accuracy rises long after train accuracy reaches 100%"
    paper = "Nanda et al. (p = 113, 30%): memorised by step 1,400, test accuracy jumps in the cleanup, 9,400 to 13,300"
    if job is None:
        return Claim(claim, paper, "the run did not complete", UNSURE)
    steps, train = job.curve("train_acc")
    test = job.curve("test_acc")[1]
    t_train, t_test = first_reaching(steps, train, LEARNED), first_reaching(steps, test, LEARNED)
    if t_train is None:
        return Claim(claim, paper, f"train accuracy {train[-1]:.2f} at step {steps[-1]:,}: never learned", UNSURE)
    at_train = test[steps.index(t_train)]
    if t_test is None:
        ours = f"train {LEARNED:.0%} at step {t_train:,}; test {test[-1]:.2f} at the last step {steps[-1]:,}"
        return Claim(claim, paper, ours, UNSURE)
    ratio = t_test / max(t_train, 1)
    ours = f"train {LEARNED:.0%} at step {t_train:,} (test {at_train:.2f} then), test {LEARNED:.0%} at {t_test:,}"
    ours += f": {ratio:.1f}x later"
    return Claim(claim, paper, ours, HOLDS if ratio >= LATE and at_train <= 0.5 else FAILS)


def _sparse(job: Job | None) -> Claim:
    claim = f"the trained embedding uses a few key frequencies (its {KEY} strongest hold most of its energy)"
    paper = "Nanda et al. Fig. 3: 5 key frequencies of 56 (k = 14, 35, 41, 42, 52), the rest of the embedding near zero"
    if job is None or not job.final.get("spectrum"):
        return Claim(claim, paper, "the run did not complete", UNSURE)
    shares = torch.tensor(job.final["spectrum"])
    start, end = job.curve("key_share")[1][0], key_share(shares)
    top = sorted(int(k) + 1 for k in shares.topk(KEY).indices)
    ours = f"{KEY} strongest of {shares.numel()} (k = {', '.join(map(str, top))}): {end:.0%} of the energy"
    ours += f" ({start:.0%} at init)"
    return Claim(claim, paper, ours, HOLDS if end >= SPARSE and end >= SHARPER * start else FAILS)


def _after_init(curve: tuple[list[int], list[float]]) -> tuple[list[int], list[float]]:
    """The records after step 0, for a log-scaled step axis."""
    steps, values = curve
    return steps[1:], values[1:]


def _plot(job: Job | None, path: Path) -> None:
    fig, (acc_ax, share_ax, spec_ax) = figure.panels(3, 13)
    if job is not None:
        for name, label in (("train_acc", "train"), ("test_acc", "test (held-out pairs)")):
            acc_ax.plot(*_after_init(job.curve(name)), label=label)
        for step, phase in PHASES:  # where Nanda et al.'s run ended each phase, for comparison
            acc_ax.axvline(step, color="grey", linestyle=":", linewidth=1)
            acc_ax.text(step, 0.5, f" {phase} (Nanda)", rotation=90, fontsize=7, color="grey", va="center")
        share_ax.plot(*_after_init(job.curve("key_share")), color="tab:green")
        if job.final.get("spectrum"):
            shares = job.final["spectrum"]
            spec_ax.bar(range(1, len(shares) + 1), shares, color="tab:purple")
            spec_ax.axhline(1 / len(shares), color="grey", linestyle=":", label="flat (no key frequency)")
    acc_ax.set(title="accuracy", xlabel="step (log scale)", ylim=(-0.02, 1.02), xscale="log")
    share_ax.set(
        title=f"embedding energy in its {KEY} strongest frequencies", xlabel="step (log scale)", ylim=(0, 1.02)
    )
    share_ax.set_xscale("log")
    spec_ax.set(title="trained embedding: energy per frequency", xlabel="frequency k", ylabel="share")
    figure.save(fig, path)
