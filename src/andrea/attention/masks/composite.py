"""A named mask made of primitives: `compose()` says it as `&`/`|` of other masks (andrea.attention.masks.
primitives), and its predicate, kernel parameters and flags are that combination's (andrea.attention.masks.
combine derives them), never hand-set. Only its kind, name, checks and examples are its own, so a config
and a backend's `mask_kinds` still name it `sliding_window`, and a backend that wants the causal part
walks `composed.masks` like any combination's.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property

from torch import Tensor

from andrea.attention.masks.base import FLAGS, Mask
from andrea.attention.masks.params import MaskParams


class Composite(Mask):
    @abstractmethod
    def compose(self) -> Mask:
        """This mask as a combination of primitives."""

    @cached_property
    def composed(self) -> Mask:
        return self.compose()

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return self.composed.predicate(b, h, q_idx, kv_idx)

    def params(self) -> MaskParams | None:
        return self.composed.params()


def _from_composition(flag: str) -> property:
    return property(lambda self: getattr(self.composed, flag), doc=f"{flag}: the composition's")


for _flag in FLAGS:  # every flag a mask declares (masks.base.FLAGS) is its composition's
    setattr(Composite, _flag, _from_composition(_flag))
