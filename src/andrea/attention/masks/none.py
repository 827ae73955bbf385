"""None (bidirectional): every query sees every key, as in an encoder."""

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False)
class NoMask(Mask):
    kind: ClassVar[str] = "none"
    is_full: ClassVar[bool] = True
    attends_self: ClassVar[bool] = True
    translation_invariant: ClassVar[bool] = True

    def params(self) -> MaskParams:
        return MaskParams()

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return (q_idx >= 0) & (kv_idx >= 0)
