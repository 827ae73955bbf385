"""Data modules: synthetic attention tasks (and, later, text)."""

from andrea.data.text import TextDataModule
from andrea.data.tasks import (
    IGNORE_INDEX,
    InductionDataModule,
    LookbackDataModule,
    RepetitionDataModule,
    SyntheticTaskDataModule,
)

__all__ = [
    "IGNORE_INDEX",
    "InductionDataModule",
    "LookbackDataModule",
    "RepetitionDataModule",
    "SyntheticTaskDataModule",
    "TextDataModule",
]
