"""Masks combined: `a & b & c` (a key is allowed when every mask allows it) or `a | b` (when any
does). One variadic combinator for both; its flags are derived from the parts', never hand-set:

    flag                   &                                   |
    is_full                all parts full                      any part full
    attends_self           all parts attend to themselves      any part does
    is_causal              all causal or full, one causal      all causal
    max_lookback           the smallest bound                  the largest, if every part has one
    batch/head_dependent   any part                            any part
    translation_invariant  all parts                           all parts
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams

OPERATORS = {"&": (all, operator.and_), "|": (any, operator.or_)}  # op -> (how flags combine, how keys combine)


def combine(op: str, *masks: Mask) -> Combined:
    """`op` ('&' or '|') over `masks`, a nested combination with the same op flattened into one."""
    parts: list[Mask] = []
    for mask in masks:
        parts.extend(mask.masks if isinstance(mask, Combined) and mask.op == op else [mask])
    return Combined(op, tuple(parts))


@dataclass(frozen=True, repr=False)
class Combined(Mask):
    op: str  # "&" or "|"
    masks: tuple[Mask, ...]
    kind: ClassVar[str] = "combined"

    def __post_init__(self) -> None:
        if self.op not in OPERATORS or len(self.masks) < 2:
            raise ValueError(f"a combined mask joins two or more masks with & or |, got {self.op!r} over {self.masks}")

    @property
    def name(self) -> str:
        return "(" + self.op.join(mask.name for mask in self.masks) + ")"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset().union(*(mask.kinds for mask in self.masks))

    @property
    def batch_dependent(self) -> bool:  # type: ignore[override]
        return any(mask.batch_dependent for mask in self.masks)

    @property
    def head_dependent(self) -> bool:  # type: ignore[override]
        return any(mask.head_dependent for mask in self.masks)

    @property
    def translation_invariant(self) -> bool:  # type: ignore[override]
        return all(mask.translation_invariant for mask in self.masks)

    @property
    def is_full(self) -> bool:  # type: ignore[override]
        return OPERATORS[self.op][0](mask.is_full for mask in self.masks)

    @property
    def attends_self(self) -> bool:  # type: ignore[override]
        return OPERATORS[self.op][0](mask.attends_self for mask in self.masks)

    @property
    def is_causal(self) -> bool:  # type: ignore[override]
        if self.op == "|":
            return all(mask.is_causal for mask in self.masks)
        return all(m.is_causal or m.is_full for m in self.masks) and any(m.is_causal for m in self.masks)

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        bounds = [mask.max_lookback for mask in self.masks if mask.max_lookback is not None]
        if not bounds or not self.translation_invariant:
            return None
        if self.op == "&":
            return min(bounds)
        return max(bounds) if len(bounds) == len(self.masks) else None

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        join = OPERATORS[self.op][1]
        return functools.reduce(join, (mask.predicate(b, h, q_idx, kv_idx) for mask in self.masks))

    def params(self) -> MaskParams | None:
        """`&` of parts that each say themselves as parameters, where one set can say them all; `|`: None."""
        if self.op != "&":
            return None
        joined: MaskParams | None = MaskParams()
        for mask in self.masks:
            part = mask.params()
            if joined is None or part is None:
                return None
            joined = joined & part
        return joined
