"""Data modules: synthetic attention tasks and text.

The modules load on first use (they import Lightning, seconds on a CPU), so that looking up
`andrea.data.packages` for a config's resolver does not.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "CompressionDataModule": "andrea.data.mad_compression",
    "CopyDataModule": "andrea.data.copying",
    "CopyingDataModule": "andrea.data.mad_copy",
    "FlipFlopDataModule": "andrea.data.algorithmic",
    "FuzzyRecallDataModule": "andrea.data.mad_recall",
    "MemorizationDataModule": "andrea.data.mad_copy",
    "ModularAdditionDataModule": "andrea.data.algorithmic",
    "ModularCountingDataModule": "andrea.data.state_tracking",
    "MQARDataModule": "andrea.data.mqar",
    "ParityDataModule": "andrea.data.state_tracking",
    "RecallDataModule": "andrea.data.mad_recall",
    "SelectiveCopyDataModule": "andrea.data.mad_copy",
    "IGNORE_INDEX": "andrea.data.tasks",
    "InductionDataModule": "andrea.data.tasks",
    "LookbackDataModule": "andrea.data.tasks",
    "RepetitionDataModule": "andrea.data.tasks",
    "SyntheticTaskDataModule": "andrea.data.tasks",
    "TextDataModule": "andrea.data.text",
    "WordProblemDataModule": "andrea.data.state_tracking",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'andrea.data' has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
