"""Sliding window: a query sees itself and the `window - 1` keys before it
(Longformer / Mistral style local attention), so memory stays bounded.

    sliding_window(w)               = causal & Band(w)
    sliding_window(w, causal=False) = Band(w, both_ways=True): |i - j| < w, for encoders
"""

from dataclasses import dataclass
from typing import ClassVar

from andrea.attention.masks.base import Mask
from andrea.attention.masks.causal import Causal
from andrea.attention.masks.composite import Composite
from andrea.attention.masks.primitives import Band


@dataclass(frozen=True, repr=False)
class SlidingWindow(Composite):
    window: int
    causal: bool = True
    kind: ClassVar[str] = "sliding_window"

    def __post_init__(self) -> None:
        if not isinstance(self.window, int) or isinstance(self.window, bool) or self.window <= 0:
            raise ValueError(
                f"mask.window={self.window!r} must be a positive integer (the number of keys a query sees)"
            )

    def compose(self) -> Mask:
        return Causal() & Band(self.window) if self.causal else Band(self.window, both_ways=True)

    @property
    def name(self) -> str:
        return f"sliding_window_{self.window}" + ("" if self.causal else "_bidirectional")

    def check_context(self, seq_len: int) -> None:
        if self.window > seq_len:
            raise ValueError(
                f"mask.window={self.window} is wider than the context data.seq_len={seq_len}; use a value <= {seq_len} "
                "(a window that covers the whole context is mask=causal)"
            )

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(3), cls(2, causal=False)]
