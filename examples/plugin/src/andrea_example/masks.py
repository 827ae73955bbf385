"""Strided: a query sees itself and every `stride`-th key before it (the Sparse Transformer's
strided pattern): with stride 3, query 7 sees keys 7, 4 and 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention import Mask


@dataclass(frozen=True, repr=False)
class Strided(Mask):
    stride: int
    kind: ClassVar[str] = "strided"
    attends_self: ClassVar[bool] = True  # distance 0 is a multiple of every stride
    translation_invariant: ClassVar[bool] = True  # a function of q_idx - kv_idx alone

    def __post_init__(self) -> None:
        if not isinstance(self.stride, int) or isinstance(self.stride, bool) or self.stride <= 0:
            raise ValueError(f"mask.stride={self.stride!r} must be a positive integer")

    @property
    def name(self) -> str:
        return f"strided_{self.stride}"

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(3)]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        distance = q_idx - kv_idx
        return (distance >= 0) & (distance % self.stride == 0)
