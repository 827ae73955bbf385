"""Data modules: synthetic attention tasks (and, later, text)."""

from andrea.data.tasks import (
    IGNORE_INDEX,
    InductionDataModule,
    LookbackDataModule,
    RepetitionDataModule,
    SyntheticTaskDataModule,
)
from andrea.data.text import TextDataModule

__all__ = [
    "IGNORE_INDEX",
    "InductionDataModule",
    "LookbackDataModule",
    "RepetitionDataModule",
    "SyntheticTaskDataModule",
    "TextDataModule",
]
