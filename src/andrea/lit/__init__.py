"""Lightning modules and callbacks."""

from andrea.lit.attention_maps import AttentionMaps
from andrea.lit.module import LanguageModelModule
from andrea.lit.run_stats import RunStats

__all__ = ["AttentionMaps", "LanguageModelModule", "RunStats"]
