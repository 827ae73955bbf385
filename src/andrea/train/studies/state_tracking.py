"""State tracking and negative eigenvalues (Grazzi et al. 2025, "Unlocking state-tracking in linear RNNs through
negative eigenvalues"; Siems et al. 2025, "DeltaProduct"): a linear RNN whose transitions' eigenvalues stay in
[0, 1] cannot keep the parity of its input, and one whose eigenvalues reach -1 can; DeltaNet's are in [0, 1]
(β in (0, 1)) unless β may reach 2 (`mixer.allow_neg_eigval`). A token's transition in Gated DeltaProduct is a
product of n generalised Householder factors, and one layer tracks the symmetric group S3 once n reaches 2.

Every record measures the accuracy of the last label of rows of the trained length (the state after the whole
row); once trained, the scaled accuracy of the last label, (accuracy - chance) / (1 - chance) with chance one in the
task's number of states (Grazzi et al.'s measure), on rows of each length of LENGTHS as a multiple of the trained
length: the trained one and longer ones, where the model must carry the state past any length it saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.train.studies import figure
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, best_by, logits, net_of

ROWS = 512  # rows each measurement reads
SCALES = (1.0, 2.0, 4.0, 6.4)  # the lengths measured, as multiples of the trained one (40: 40, 80, 160, 256)
SOLVED = 0.9  # scaled accuracy counted as tracking the state (Grazzi et al.'s solved runs: 0.97 to 1.00)
FAILED = 0.5  # scaled accuracy below which a model is counted as not tracking it (theirs: 0.00 to 0.31)
TASKS = {"parity": "parity", "modular_counting": "counting mod 3", "word_problem": "S3"}
STYLES = ("-", "--", ":")  # the learning panel's line a task


@dataclass
class StateTracking(Study):
    name = "state_tracking"
    title = "State tracking: negative eigenvalues and Householder products (Grazzi et al. 2025; Siems et al. 2025)"
    tasks = ("parity", "modular_counting", "word_problem")

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        return {"last_acc": _last_accuracy(module, data, data.seq_len)}

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        chance = 1.0 / data.vocab_size  # the labels are the states, one id each
        longest = net_of(module).max_context
        lengths = [n for n in (round(scale * data.seq_len) for scale in SCALES) if n <= longest]  # what it holds
        scaled = {str(n): (_last_accuracy(module, data, n) - chance) / (1.0 - chance) for n in lengths}
        return {"task": data.name, "trained": data.seq_len, "scaled": scaled}

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        done = [job for job in jobs if job.final]
        _plot(done, figure)
        arms = best_by(done, lambda job: (_task(job), arm_of(job)))  # a model's best run where a task has several
        return [
            _neg_eigval(arms, "parity", "accuracy 1.000 against 0.017"),
            _neg_eigval(
                arms, "modular_counting", "accuracy on modular arithmetic (mod 5, no brackets) 0.971 against 0.314"
            ),
            _householder(arms),
            _control(arms),
        ]


def _last_accuracy(module: torch.nn.Module, data: Any, length: int) -> float:
    """The accuracy of the last label of ROWS fresh rows of `length` tokens (a generator seeded by the length)."""
    rows = data.variant(seq_len=length, num_train=1, num_val=ROWS)
    ids, labels = rows.make_rows(ROWS, torch.Generator().manual_seed(length))
    return float((logits(module, ids)[:, -1].argmax(-1) == labels[:, -1]).float().mean())


def _task(job: Job) -> str:
    return str(job.final["task"])


def arm_of(job: Job) -> str:
    """The model a job trained, as the figure and the verdicts name it."""
    mixer = str(job.setting("mixer.name", "attention"))
    if mixer == "attention":
        return "attention"
    eigenvalues = "[-1, 1]" if job.setting("mixer.allow_neg_eigval") else "[0, 1]"
    steps = f", n={job.setting('mixer.n_householder')}" if mixer == "gated_deltaproduct" else ""
    return f"{mixer} {eigenvalues}{steps}"


def beyond(job: Job) -> float:
    """The mean scaled accuracy over the lengths past the trained one."""
    scaled = job.final["scaled"]
    longer = [value for n, value in scaled.items() if int(n) > job.final["trained"]]
    return sum(longer) / len(longer)


def _trained(job: Job) -> float:
    return job.final["scaled"][str(job.final["trained"])]


def _said(job: Job) -> str:
    return f"{arm_of(job)} {_trained(job):.2f} at the trained length, {beyond(job):.2f} beyond"


def _neg_eigval(arms: dict[tuple[str, str], Job], task: str, paper_figures: str) -> Claim:
    return _one_solves(
        f"DeltaNet with eigenvalues in [0, 1] fails {TASKS[task]} beyond the training length; in [-1, 1] solves it",
        f"Grazzi et al. (2 layers of 128, trained on 3-40 tokens, tested on 40-256): scaled {paper_figures}",
        arms.get((task, "deltanet [-1, 1]")),
        arms.get((task, "deltanet [0, 1]")),
        "a DeltaNet run of the task",
    )


def _householder(arms: dict[tuple[str, str], Job]) -> Claim:
    return _one_solves(
        "one layer of Gated DeltaProduct tracks S3 with 2 Householder steps a token, not with 1",
        "Siems et al. (1 layer, [-1, 1]): S3 needs n=2; n=1 is not expected to converge",
        arms.get(("word_problem", "gated_deltaproduct [-1, 1], n=2")),
        arms.get(("word_problem", "gated_deltaproduct [-1, 1], n=1")),
        "a Gated DeltaProduct run of S3",
    )


def _one_solves(claim: str, paper: str, solver: Job | None, other: Job | None, runs: str) -> Claim:
    """A claim that one model solves a task beyond the training length and the other fails it."""
    if solver is None or other is None:
        return Claim(claim, paper, f"{runs} did not complete", UNSURE)
    ours = f"scaled accuracy: {_said(solver)}; {_said(other)}"
    return Claim(claim, paper, ours, HOLDS if beyond(solver) >= SOLVED and beyond(other) < FAILED else FAILS)


def _control(arms: dict[tuple[str, str], Job]) -> Claim:
    claim = "softmax attention (the control) learns parity at the trained length but not beyond it"
    paper = "Deletang et al. 2023 (Neural networks and the Chomsky hierarchy): transformers stay at chance on parity"
    job = arms.get(("parity", "attention"))
    if job is None:
        return Claim(claim, paper, "the attention run of parity did not complete", UNSURE)
    ours = f"scaled accuracy: {_said(job)}"
    if _trained(job) < SOLVED:
        return Claim(claim, paper, f"{ours} (not judged: it does not learn the trained length)", UNSURE)
    return Claim(claim, paper, ours, HOLDS if beyond(job) < FAILED else FAILS)


def _plot(jobs: list[Job], path: Path) -> None:
    """Scaled accuracy of the last label against the row's length, one panel a task, one line a model, the
    trained length marked; beside them, the last label's accuracy at the trained length over training (a model's
    colour, a task's line style)."""
    tasks = [task for task in TASKS if any(_task(job) == task for job in jobs)]
    fig, axes = figure.panels(len(tasks) + 1, 5 * (len(tasks) + 1), 4)
    colours: dict[str, str] = {}
    for ax, task in zip(axes, tasks, strict=False):
        _draw_task(ax, axes[-1], [job for job in jobs if _task(job) == task], colours, STYLES[tasks.index(task)])
    axes[-1].set(title="learning, at the trained length", xlabel="step", ylabel="accuracy, last label")
    figure.save(fig, path)


def _draw_task(ax: Any, learning: Any, jobs: list[Job], colours: dict[str, str], style: str) -> None:
    """One task's panel (each model's scaled accuracy by length) and its models' curves on the learning panel."""
    for job in jobs:
        colour = colours.setdefault(arm_of(job), f"C{len(colours)}")
        lengths = sorted(job.final["scaled"], key=int)
        ax.plot([int(n) for n in lengths], [job.final["scaled"][n] for n in lengths], marker="o", color=colour,
                label=arm_of(job))  # fmt: skip
        learning.plot(*job.curve("last_acc"), color=colour, linestyle=style,
                      label=f"{arm_of(job)} ({TASKS[_task(job)]})")  # fmt: skip
    ax.axvline(jobs[0].final["trained"], color="grey", linestyle=":")
    ax.set(title=TASKS[_task(jobs[0])], xlabel="row length (dotted: trained)", ylabel="scaled accuracy, last label",
           ylim=(-0.1, 1.05))  # fmt: skip
