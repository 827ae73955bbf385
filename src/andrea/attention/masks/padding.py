"""Key padding: sequence b holds `lengths[b]` real tokens, padded on the right;
no query attends to a padding key. A sequence of length 0 masks every row."""

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False, eq=False)  # holds a tensor: equal only to itself
class KeyPadding(Mask):
    lengths: Tensor  # (B,) number of real tokens per sequence
    kind: ClassVar[str] = "padding"
    batch_dependent: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.lengths, Tensor) or self.lengths.dim() != 1 or self.lengths.is_floating_point():
            raise ValueError("padding mask: lengths must be a 1-D integer tensor of shape (batch,)")
        # Checked on CPU only: reading a GPU tensor's values would make the host wait for the device on every batch.
        if self.lengths.device.type == "cpu" and bool((self.lengths < 0).any()):
            raise ValueError(f"padding mask: lengths must be >= 0, got {self.lengths.tolist()}")

    @classmethod
    def from_attention_mask(cls, attention_mask: Tensor) -> "KeyPadding":
        """From a (B, S) 0/1 tensor of right-padded sequences (1 = real token)."""
        return cls(attention_mask.long().sum(-1))

    def params(self) -> MaskParams:
        return MaskParams(lengths=self.lengths)

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        """Lengths seq - 3 and 0: a sequence with no token at all puts empty rows inside the matrix."""
        return [cls(torch.tensor([seq - 3, 0] + [seq] * (batch - 2))[:batch])]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return kv_idx < self.lengths.to(kv_idx.device)[b]
