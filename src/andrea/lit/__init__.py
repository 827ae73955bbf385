"""Lightning modules and callbacks."""

from andrea.lit.callbacks import AttentionMaps, RunStats
from andrea.lit.module import LanguageModelModule

__all__ = ["AttentionMaps", "LanguageModelModule", "RunStats"]
