"""Copying (Jelassi et al. 2024, "Repeat after me: transformers are better than state space models at copying"):
attention learns to copy strings in fewer steps than a model with a fixed-size state, copies strings longer than
it was trained on, and a fixed-state model fails once the string outgrows its state.

Every record measures the string accuracy (every letter of the copy and its EOS right, Jelassi et al.'s measure)
on validation rows of the lengths trained on; once trained, the string accuracy at each length of a grid up to 4
times the longest trained, and the state a sequence's cache keeps: its numbers, every layer, at the longest
length (a recurrent state does not grow with it; attention's KV cache does). The state is counted in numbers (the
floats the model carries from one token to the next), where Jelassi et al.'s bound counts its bits: at these sizes
a state holds far more bits than a string of 64 letters has (64 · log2 26 = 301), so a failure measured here is
the model's, not the bound's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.data.copying import string_correct
from andrea.train.studies import figure
from andrea.train.studies.base import (
    FAILS,
    HOLDS,
    UNSURE,
    Claim,
    Job,
    Study,
    best_by,
    first_reaching,
    logits,
    net_of,
)

ROWS = 256  # rows each measurement reads
SCALES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)  # the lengths measured, as multiples of the longest trained
LEARNED = 0.9  # string accuracy counted as copying
FEWER = 2.0  # "fewer steps": a fixed-state model needs at least this many times attention's steps, or never gets there
LONGER = 2.0  # "longer than trained": attention copies strings this many times the longest trained
FAILED = 0.5  # a fixed-state model "fails" at a length where its string accuracy is below this


@dataclass
class Copying(Study):
    name = "copying"
    title = "Copying: attention against a fixed state (Jelassi et al. 2024)"
    tasks = ("copy",)

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        batch = data.probe_batch(ROWS)
        return {"string_acc": float(string_correct(logits(module, batch["input_ids"]), batch["labels"]).float().mean())}

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        net = net_of(module)
        lengths = sorted({max(1, round(scale * data.max_length)) for scale in SCALES})
        lengths = [n for n in lengths if 2 * n + 3 <= net.max_context]  # what the model's context holds
        accuracy = {}
        for n in lengths:
            rows = data.variant(min_length=n, max_length=n, seq_len=2 * n + 3, num_train=1, num_val=ROWS)
            ids, labels = rows.make_rows(ROWS, torch.Generator().manual_seed(n))
            accuracy[str(n)] = float(string_correct(logits(module, ids), labels).float().mean())
        longest = 2 * max(lengths) + 3 if lengths else net.max_context
        sizes = [mixer.cache_size() for mixer in net.mixers]
        fixed = all(size.at(1) == size.at(longest) for size in sizes)  # a state that does not grow with the text
        return {
            "trained": data.max_length,
            "accuracy": accuracy,
            "state": sum(size.at(longest) for size in sizes),
            "fixed": fixed,
        }

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        best = best_per_arm(jobs)
        attention = [job for job in best if not job.final.get("fixed", True)]
        fixed = sorted((job for job in best if job.final.get("fixed")), key=lambda job: job.final["state"])
        _plot(attention, fixed, [job for job in jobs if job not in best], figure)
        model = attention[0] if attention else None
        return [_fewer(model, fixed), _longer(model), _outgrown(fixed)]


def best_per_arm(jobs: list[Job]) -> list[Job]:
    """Each model's best run over the learning rates (studies.base.best_by), in the order the models first appear."""
    return list(best_by([job for job in jobs if job.final], arm_of).values())


def arm_of(job: Job) -> str:
    """The model a job trained, as the figure and the verdicts name it."""
    mixer = str(job.setting("mixer.name", "attention"))
    return mixer if mixer == "attention" else f"{mixer} (d_state {job.setting('mixer.d_state')})"


def _learned_at(job: Job) -> int | None:
    steps, accuracy = job.curve("string_acc")
    return first_reaching(steps, accuracy, LEARNED)


def _said(step: int | None) -> str:
    return "never" if step is None else f"{step:,}"


def _accuracy(job: Job, scale: float) -> float | None:
    return job.final.get("accuracy", {}).get(str(max(1, round(scale * job.final["trained"]))))


def _fewer(attention: Job | None, fixed: list[Job]) -> Claim:
    claim = "attention learns to copy in fewer steps than a fixed-state model"
    paper = "Jelassi et al. (160M models, strings up to 300): transformers need 100x fewer samples than the best GSSM"
    if attention is None or not fixed:
        return Claim(claim, paper, "the attention run or every fixed-state run did not complete", UNSURE)
    first = _learned_at(attention)
    steps = "; ".join(f"{arm_of(job)} {_said(_learned_at(job))}" for job in fixed)
    ours = f"steps to {LEARNED:.0%} string accuracy: attention {_said(first)}; {steps}"
    if first is None:
        return Claim(claim, paper, f"{ours} (not judged: attention never copied)", UNSURE)
    slower = [(step := _learned_at(job)) is None or step >= FEWER * max(first, 1) for job in fixed]
    return Claim(claim, paper, ours, HOLDS if all(slower) else FAILS)


def _longer(attention: Job | None) -> Claim:
    claim = f"attention copies strings {LONGER:g}x longer than it was trained on"
    paper = "Jelassi et al. (trained on up to 50): Hard-ALiBi copies near perfectly to 1,000, Mamba drops to 0 at once"
    if attention is None:
        return Claim(claim, paper, "the attention run did not complete", UNSURE)
    trained, longer = _accuracy(attention, 1.0), _accuracy(attention, LONGER)
    if trained is None or longer is None:
        return Claim(claim, paper, "the model's context holds no string that long", UNSURE)
    ours = f"string accuracy at {attention.final['trained']} letters {trained:.2f}, at {LONGER:g}x {longer:.2f}"
    if trained < LEARNED:
        return Claim(claim, paper, f"{ours} (not judged: it does not copy the lengths it trained on)", UNSURE)
    return Claim(claim, paper, ours, HOLDS if longer >= LEARNED else FAILS)


def _longest(job: Job) -> int:
    """The longest length of the grid the model copies (string accuracy at least LEARNED), 0 if none."""
    return max((int(n) for n, acc in job.final["accuracy"].items() if acc >= LEARNED), default=0)


def _state_words(job: Job) -> str:
    accuracy = job.final["accuracy"]
    if not accuracy:
        return f"{arm_of(job)}: no length measured"
    last = max(accuracy, key=int)
    copies = f"copies up to {_longest(job)}, {accuracy[last]:.2f} at {last}"
    return f"{arm_of(job)}, {job.final['state']:,} numbers: {copies}"


def _outgrown(fixed: list[Job]) -> Claim:
    claim = "a fixed-state model fails on strings longer than it trained on; a larger state copies longer ones"
    paper = "Jelassi et al.: Mamba drops to 0 almost at once past its training lengths (Cor. 2.8 bounds the state)"
    said = "; ".join(_state_words(job) for job in fixed) or "no run"
    judged = [job for job in fixed if (_accuracy(job, 1.0) or 0.0) >= LEARNED]
    if len(judged) < 2:
        return Claim(claim, paper, f"{said} (not judged: fewer than 2 copy the lengths trained on)", UNSURE)
    return Claim(claim, paper, said, HOLDS if _fails_beyond(judged) and _grows(judged) else FAILS)


def _fails_beyond(jobs: list[Job]) -> bool:
    """Each model fails (string accuracy under FAILED) at some length of the grid."""
    return all(job.final["accuracy"] and min(job.final["accuracy"].values()) < FAILED for job in jobs)


def _grows(jobs: list[Job]) -> bool:
    """The longest length copied never shrinks as the state grows (the jobs in order of state), and is larger at
    the largest state than at the smallest."""
    longest = [_longest(job) for job in jobs]
    return longest == sorted(longest) and longest[-1] > longest[0]


def _plot(attention: list[Job], fixed: list[Job], others: list[Job], path: Path) -> None:
    """Jelassi et al.'s copying figures as this run draws them: string accuracy over training (a), against the
    string's length with the longest trained marked (b), and, at each length, against the state (c); each model's
    best learning rate drawn, the other rates of the grid faint beside it (the spread over the grid)."""
    fig, (steps_ax, length_ax, state_ax) = figure.panels(3, 15, 4)
    _draw_runs(steps_ax, length_ax, [*attention, *fixed], others)
    _draw_state(state_ax, fixed)
    steps_ax.set(title="(a) learning to copy", xlabel="step", ylabel="string accuracy (trained lengths)")
    length_ax.set(title="(b) beyond the lengths trained on", xlabel="string length", ylabel="string accuracy")
    state_ax.set(title="(c) fixed-state models against their state", xlabel="state (numbers, every layer)")
    for ax in (steps_ax, length_ax, state_ax):
        ax.set_ylim(-0.02, 1.02)
    figure.save(fig, path)


def _draw_runs(steps_ax: Any, length_ax: Any, best: list[Job], others: list[Job]) -> None:
    """Panels (a) and (b): each model's best run, in its colour, and its other rates faint in the same."""
    colours = {arm_of(job): f"C{i}" for i, job in enumerate(best)}
    for job in [*best, *others]:
        look = {"color": colours.get(arm_of(job), "grey"), "alpha": 0.3 if job in others else 1.0}
        label = None if job in others else f"{arm_of(job)}, lr {job.setting('model.optimizer.lr')}"
        steps_ax.plot(*job.curve("string_acc"), label=label, **look)
        accuracy = job.final.get("accuracy", {})
        lengths = sorted(accuracy, key=int)
        length_ax.plot([int(n) for n in lengths], [accuracy[n] for n in lengths], marker="o", label=label, **look)
    if best:
        length_ax.axvline(best[0].final["trained"], color="grey", linestyle=":", label="longest trained")


def _draw_state(ax: Any, fixed: list[Job]) -> None:
    """Panel (c): at each length, the fixed-state models' string accuracy against their state."""
    if not fixed:
        return
    states = [job.final["state"] for job in fixed]
    for n in sorted(fixed[0].final["accuracy"], key=int):
        ax.plot(states, [job.final["accuracy"].get(n, 0.0) for job in fixed], marker="o", label=f"{n} letters")
    ax.set_xscale("log")
