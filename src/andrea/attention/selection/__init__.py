"""Selections of keys from the data (andrea.attention.selection.base): DSA's lightning indexer, MoBA's blocks."""

from andrea.attention.selection.base import Selection, SelectionSizes

__all__ = ["Selection", "SelectionSizes"]
