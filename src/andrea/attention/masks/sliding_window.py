"""Sliding window: a query sees itself and the `window - 1` keys before it
(Longformer / Mistral style local attention), so memory stays bounded."""

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False)
class SlidingWindow(Mask):
    window: int
    causal: bool = True  # False: a symmetric band |i - j| < window, for encoders
    kind: ClassVar[str] = "sliding_window"
    attends_self: ClassVar[bool] = True
    translation_invariant: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.window, int) or isinstance(self.window, bool) or self.window <= 0:
            raise ValueError(
                f"mask.window={self.window!r} must be a positive integer (the number of keys a query sees)"
            )

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        return self.window if self.causal else None  # a KV cache keeps `window` keys

    @property
    def name(self) -> str:
        return f"sliding_window_{self.window}" + ("" if self.causal else "_bidirectional")

    def params(self) -> MaskParams:
        return MaskParams(causal=self.causal, window=self.window, band=not self.causal)

    def check_context(self, seq_len: int) -> None:
        if self.window > seq_len:
            raise ValueError(
                f"mask.window={self.window} is wider than the context data.seq_len={seq_len}; use a value <= {seq_len} "
                "(a window that covers the whole context is mask=causal)"
            )

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(3), cls(2, causal=False)]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        distance = q_idx - kv_idx
        if self.causal:
            return (distance >= 0) & (distance < self.window)
        return (distance < self.window) & (distance > -self.window)
