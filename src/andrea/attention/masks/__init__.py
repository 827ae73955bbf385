"""Mask strategies: one small file each, composable with `&` and `|`."""

from andrea.attention.masks.base import FLAGS, Mask, PrecomputedMask
from andrea.attention.masks.causal import Causal
from andrea.attention.masks.chunked import Chunked
from andrea.attention.masks.combine import Combined, combine
from andrea.attention.masks.document import Document
from andrea.attention.masks.none import NoMask
from andrea.attention.masks.padding import KeyPadding
from andrea.attention.masks.params import MaskParams
from andrea.attention.masks.prefix_lm import PrefixLM
from andrea.attention.masks.sliding_window import SlidingWindow

__all__ = [
    "FLAGS",
    "Combined",
    "Causal",
    "Chunked",
    "Document",
    "KeyPadding",
    "Mask",
    "MaskParams",
    "NoMask",
    "combine",
    "PrecomputedMask",
    "PrefixLM",
    "SlidingWindow",
]
