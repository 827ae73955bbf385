"""Anchored window (StreamingLLM's attention sinks): a query sees the first `anchors` keys, which
models learn to park attention on, and itself with the `window - 1` keys before it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention import Mask


@dataclass(frozen=True, repr=False)
class AnchoredWindow(Mask):
    anchors: int
    window: int
    kind: ClassVar[str] = "anchored_window"
    attends_self: ClassVar[bool] = True

    def __post_init__(self) -> None:
        for key in ("anchors", "window"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < (key == "window"):
                raise ValueError(f"mask.{key}={value!r} must be an integer >= {int(key == 'window')}")

    @property
    def name(self) -> str:
        return f"anchored_window_{self.anchors}_{self.window}"

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(anchors=2, window=3)]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        distance = q_idx - kv_idx
        return (distance >= 0) & ((distance < self.window) | (kv_idx < self.anchors))
