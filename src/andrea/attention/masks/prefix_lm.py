"""Prefix-LM: the first `prefix_len` tokens see each other in both directions
(the prompt is encoded bidirectionally), every later token is causal.

    prefix_lm(p) = causal | Prefix(p)
"""

from dataclasses import dataclass
from typing import ClassVar

from andrea.attention.masks.base import Mask
from andrea.attention.masks.causal import Causal
from andrea.attention.masks.composite import Composite
from andrea.attention.masks.params import MaskParams
from andrea.attention.masks.primitives import Prefix


@dataclass(frozen=True, repr=False)
class PrefixLM(Composite):
    prefix_len: int
    kind: ClassVar[str] = "prefix_lm"

    def __post_init__(self) -> None:
        if not isinstance(self.prefix_len, int) or isinstance(self.prefix_len, bool) or self.prefix_len < 0:
            raise ValueError(f"mask.prefix_len={self.prefix_len!r} must be an integer >= 0 (0 is plain causal)")

    def compose(self) -> Mask:
        return Causal() | Prefix(self.prefix_len)

    @property
    def name(self) -> str:
        return f"prefix_lm_{self.prefix_len}"

    def params(self) -> MaskParams:
        return MaskParams(causal=True, prefix=self.prefix_len)  # `|` has no parameters in general; this one has

    def check_context(self, seq_len: int) -> None:
        if self.prefix_len > seq_len:
            raise ValueError(
                f"mask.prefix_len={self.prefix_len} is longer than the context data.seq_len={seq_len}; "
                f"use a value <= {seq_len} (a prefix that covers the whole context is mask=none)"
            )

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(4)]
