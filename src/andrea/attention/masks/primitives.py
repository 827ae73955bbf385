"""The primitives the named masks are composed of (not registered themselves: `sliding_window` and
`prefix_lm` are what a config names).

    Band(window)                  query - key < window: no key `window` or more positions back
    Band(window, both_ways=True)  ... and key - query < window: a symmetric band, for encoders
    Prefix(length)                key < length: the first `length` keys, seen by every query
    Chunk(size)                   query // size == key // size: the same chunk of `size` tokens

    sliding_window(w)        = causal & Band(w)
    sliding_window(w, False) = Band(w, both_ways=True)
    prefix_lm(p)             = causal | Prefix(p)
    chunked(c)               = causal & Chunk(c)
"""

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False)
class Band(Mask):
    window: int
    both_ways: bool = False
    kind: ClassVar[str] = "band"
    attends_self: ClassVar[bool] = True
    translation_invariant: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return f"band_{self.window}" + ("_both_ways" if self.both_ways else "")

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        return None if self.both_ways else self.window  # a KV cache keeps `window` keys of a causal window

    def params(self) -> MaskParams:
        return MaskParams(window=self.window, band=self.both_ways)

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        distance = q_idx - kv_idx
        near = distance < self.window
        return near & (distance > -self.window) if self.both_ways else near


@dataclass(frozen=True, repr=False)
class Prefix(Mask):
    length: int
    kind: ClassVar[str] = "prefix"

    @property
    def name(self) -> str:
        return f"prefix_{self.length}"

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return kv_idx < self.length  # broadcasts over the queries


@dataclass(frozen=True, repr=False)
class Chunk(Mask):
    """The tokens cut into chunks of `size` from the sequence's first: a query sees the keys of its own chunk.
    Its look-back is unbounded for a KV cache: the chunks are counted from position 0, which a cache that drops
    keys would no longer know, so the cache keeps every key."""

    size: int
    kind: ClassVar[str] = "chunk"
    attends_self: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return f"chunk_{self.size}"

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx // self.size == kv_idx // self.size
