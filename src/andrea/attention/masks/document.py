"""Document: several sequences packed into one row; a token attends only to
tokens of its own document. Compose with causal for packed LM training."""

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from andrea.attention.masks.base import Mask
from andrea.attention.masks.params import MaskParams


@dataclass(frozen=True, repr=False, eq=False)  # holds a tensor: equal only to itself
class Document(Mask):
    document_ids: Tensor  # (B, S) integer segment id of every key position
    kind: ClassVar[str] = "document"
    batch_dependent: ClassVar[bool] = True
    attends_self: ClassVar[bool] = True

    def __post_init__(self) -> None:
        ids = self.document_ids
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.is_floating_point():
            raise ValueError("document mask: document_ids must be a 2-D integer tensor of shape (batch, seq_len)")

    def params(self) -> MaskParams:
        return MaskParams(document_ids=self.document_ids)

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        """Three documents in the first sequence, two in the second."""
        rows = [[0] * 3 + [1] * 4 + [2] * (seq - 7), [0] * (seq - 2) + [1] * 2]
        return [cls(torch.tensor(rows * batch)[:batch, :seq])]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        ids = self.document_ids.to(kv_idx.device)
        return ids[b, q_idx] == ids[b, kv_idx]
