"""andrea's data modules by the name each gives itself (`name`): the one registry through which what a file
says about data is mapped back onto our own classes: a checkpoint's task (andrea-eval), a run's recorded
`config.data` (andrea-inspect). A name or a `_target_` read from a file picks one of these; nothing it says is
imported or called on its word."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from andrea.utils.rules import PLAIN

if TYPE_CHECKING:
    import lightning as L

    from andrea.data.tasks import SyntheticTaskDataModule

TASKS = {  # the synthetic tasks: what a checkpoint records of its data (CHECKPOINT_TASK_KEY)
    "repetition": "andrea.data.tasks:RepetitionDataModule",
    "lookback": "andrea.data.tasks:LookbackDataModule",
    "induction": "andrea.data.tasks:InductionDataModule",
    "mqar": "andrea.data.mqar:MQARDataModule",
    "recall": "andrea.data.mad_recall:RecallDataModule",
    "fuzzy_recall": "andrea.data.mad_recall:FuzzyRecallDataModule",
    "selective_copy": "andrea.data.mad_copy:SelectiveCopyDataModule",
    "copying": "andrea.data.mad_copy:CopyingDataModule",
    "memorization": "andrea.data.mad_copy:MemorizationDataModule",
    "compression": "andrea.data.mad_compression:CompressionDataModule",
    "copy": "andrea.data.copying:CopyDataModule",
    "flip_flop": "andrea.data.algorithmic:FlipFlopDataModule",
    "modular_addition": "andrea.data.algorithmic:ModularAdditionDataModule",
    "parity": "andrea.data.state_tracking:ParityDataModule",
    "modular_counting": "andrea.data.state_tracking:ModularCountingDataModule",
    "word_problem": "andrea.data.state_tracking:WordProblemDataModule",
}
DATA_MODULES = {**TASKS, "text": "andrea.data.text:TextDataModule"}

# A config's `_target_` spells a class where it lives (andrea.data.mqar.MQARDataModule, as conf/data/mqar.yaml
# does) or as the package exports it (andrea.data.RepetitionDataModule): either names the same entry.
TARGETS = {
    target: name
    for name, where in DATA_MODULES.items()
    for module, _, attribute in [where.partition(":")]
    for target in (f"{module}.{attribute}", f"andrea.data.{attribute}")
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
    return _load(TASKS[name])


def data_class(name: str) -> type[L.LightningDataModule]:
    """The data module of any name in DATA_MODULES, text's included."""
    return _load(DATA_MODULES[name])


def _load(where: str) -> Any:
    module, _, attribute = where.partition(":")
    return getattr(import_module(module), attribute)


def plain(value: object) -> bool:
    """Whether a setting read from a file is data a constructor may take: a string, number, boolean or null, or
    a mapping of names to such (data.eval_sets: {name: {setting: value}})."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and plain(item) for key, item in value.items())
    return isinstance(value, PLAIN)
