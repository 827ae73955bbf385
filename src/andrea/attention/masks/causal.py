"""Causal: query i sees keys 0..i, so no position can read the token it predicts."""

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False)
class Causal(Mask):
    kind: ClassVar[str] = "causal"
    is_causal: ClassVar[bool] = True
    attends_self: ClassVar[bool] = True
    translation_invariant: ClassVar[bool] = True

    def params(self) -> MaskParams:
        return MaskParams(causal=True)

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx >= kv_idx
