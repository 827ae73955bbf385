"""Lightning modules and callbacks."""

from andrea.train.lit.attention_maps import AttentionMaps
from andrea.train.lit.module import LanguageModelModule
from andrea.train.lit.run_stats import RunStats

__all__ = ["AttentionMaps", "LanguageModelModule", "RunStats"]
