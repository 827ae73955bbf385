"""MAD's aggregate score (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures"; athms/mad-lab's
analysis.compute_model_mad_scores), from a sweep's runs (`report.mad_score=true`):

    1. of each model, task, task setting and seed, the best run over `report.best_over` (MAD: the learning rate and
       the weight decay), by the accuracy per class (`val/acc_macro`: MAD's test accuracy, torchmetrics'
       MulticlassAccuracy with its macro average);
    2. a task's score, the mean of those bests over the task's settings (and seeds);
    3. the model's MAD score, the mean over MAD's six tasks: given only where the model has all six, else its
       tasks' scores are shown with the missing tasks named.

A run's model is its overrides less the seed, the best_over keys and what picks the task and its settings
(`experiment`, `data`, `data.*`), named by those that differ from another model's; its task is its data module,
read from the run's recorded config through andrea.data.catalog (a name our own registry knows, never imported
on the file's word; recall with `frac_noise` > 0 is MAD's noisy recall); its setting, its `data.*` overrides.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from andrea.data.catalog import TARGETS
from andrea.train.sweep_report import differing_overrides
from andrea.utils.run_result import RunResult

MAD_SCORES = "mad_scores.md"  # in the sweep dir
MAD_TASKS = ("recall", "noisy_recall", "fuzzy_recall", "selective_copy", "compression", "memorization")
TASK_KEYS = ("experiment", "data")  # the overrides that pick a task; `data.*` its settings
ONE_MODEL = "the sweep's model"  # the label where every run is of one model


@dataclass
class ModelScores:
    model: str  # the overrides that set it apart from the sweep's other models, or ONE_MODEL
    tasks: dict[str, float] = field(default_factory=dict)  # task -> its score

    @property
    def missing(self) -> list[str]:
        return [task for task in MAD_TASKS if task not in self.tasks]

    @property
    def score(self) -> float | None:
        """The mean over MAD's six tasks; None while one is missing."""
        return None if self.missing else statistics.fmean(self.tasks[task] for task in MAD_TASKS)


def mad_scores(results: Sequence[RunResult], best_over: Sequence[str] = ()) -> list[ModelScores]:
    """Each model's task scores, in the order its first run appears (a MAD task only; other runs left out). A model
    is named by its overrides that differ from another model's; one model alone, ONE_MODEL."""
    best = _best_runs(results, best_over)
    by_model: dict[str, dict[str, list[float]]] = {}
    for (model, task, _, _), value in best.items():
        by_model.setdefault(model, {}).setdefault(task, []).append(value)
    return [ModelScores(model, {task: statistics.fmean(tasks[task]) for task in MAD_TASKS if task in tasks})
            for model, tasks in by_model.items()]  # fmt: skip


def _best_runs(results: Sequence[RunResult], best_over: Sequence[str]) -> dict[tuple[str, str, str, str], float]:
    """(model, task, setting, seed) -> the best val/acc_macro over the best_over keys, of the completed MAD runs."""
    runs = [(r, task) for r in results if r.status == "completed" and r.val_acc_macro is not None
            and (task := task_of(r)) in MAD_TASKS]  # fmt: skip
    parts = [_parts(r.overrides, best_over) for r, _ in runs]
    labels = differing_overrides([model for model, _, _ in parts])
    labels = labels if len(set(labels)) > 1 else [ONE_MODEL] * len(labels)
    best: dict[tuple[str, str, str, str], float] = {}
    for (result, task), label, (_, setting, seed) in zip(runs, labels, parts, strict=True):
        key = (label, task, setting, seed)
        best[key] = max(best.get(key, -1.0), float(result.val_acc_macro or 0.0))
    return best


def task_of(result: RunResult) -> str | None:
    """The run's task: its data module by its catalog name, from its recorded config (recall with noise, MAD's noisy
    recall); None for one the catalog does not know."""
    data = (result.config or {}).get("data")
    target = data.get("_target_") if isinstance(data, dict) else None
    name = TARGETS.get(target) if isinstance(target, str) else None
    noisy = isinstance(data, dict) and isinstance(data.get("frac_noise"), (int, float)) and data["frac_noise"] > 0
    return "noisy_recall" if name == "recall" and noisy else name  # one module, MAD's two tasks (conf/data)


def _parts(overrides: Sequence[str], best_over: Sequence[str]) -> tuple[list[str], str, str]:
    """A run's model (its overrides), task setting and seed (each joined)."""
    model, setting, seed = [], [], ""
    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        if key == "seed":
            seed = override.partition("=")[2]
        elif key.startswith("data."):
            setting.append(override)
        elif key not in TASK_KEYS and key not in best_over:
            model.append(override)
    return model, " ".join(sorted(setting)), seed


def score_rows(scores: Sequence[ModelScores]) -> list[dict[str, str]]:
    """A row per model: its tasks' scores (blank where missing) and its MAD score (or the missing tasks named)."""
    return [
        {"model": entry.model, **{t: f"{entry.tasks[t]:.3f}" if t in entry.tasks else "" for t in MAD_TASKS},
         "MAD score": f"{entry.score:.3f}" if entry.score is not None else f"missing: {', '.join(entry.missing)}"}
        for entry in scores
    ]  # fmt: skip


def mad_table(rows: Sequence[dict[str, str]]) -> str:
    """score_rows as a markdown table."""
    columns = ["model", *MAD_TASKS, "MAD score"]
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    lines += ["| " + " | ".join(row[c] for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"
