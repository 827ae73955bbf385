"""andrea's synthetic tasks by the name each data module gives itself (`name`): how a task named in a checkpoint
is mapped back onto our own class (andrea-eval). A name from a file picks one of these, nothing else."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from andrea.data.tasks import SyntheticTaskDataModule

TASKS = {
    "repetition": "andrea.data.tasks:RepetitionDataModule",
    "lookback": "andrea.data.tasks:LookbackDataModule",
    "induction": "andrea.data.tasks:InductionDataModule",
    "mqar": "andrea.data.mqar:MQARDataModule",
    "recall": "andrea.data.mad_recall:RecallDataModule",
    "fuzzy_recall": "andrea.data.mad_recall:FuzzyRecallDataModule",
    "selective_copy": "andrea.data.mad_copy:SelectiveCopyDataModule",
    "memorization": "andrea.data.mad_copy:MemorizationDataModule",
    "flip_flop": "andrea.data.algorithmic:FlipFlopDataModule",
    "modular_addition": "andrea.data.algorithmic:ModularAdditionDataModule",
}


CHECKPOINT_TASK_KEY = "andrea_task"  # {"name": ..., "settings": {...}}: what the LightningModule saves


def task_record(datamodule: object) -> dict[str, Any] | None:
    """What a checkpoint keeps of the data module: its task's name and settings, or None (text, a user's own)."""
    from andrea.data.tasks import SyntheticTaskDataModule

    if not isinstance(datamodule, SyntheticTaskDataModule) or datamodule.name not in TASKS:
        return None
    return {"name": datamodule.name, "settings": datamodule.settings()}


def task_class(name: str) -> type[SyntheticTaskDataModule]:
    """The data module of a task name (one of TASKS)."""
    module, _, attribute = TASKS[name].partition(":")
    return getattr(import_module(module), attribute)
