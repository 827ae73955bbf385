"""Selected: the keys a selection chose for each query from the data (andrea.attention.selection: DSA's top-k
keys, MoBA's blocks), as a boolean tensor. A layer with a selection ANDs it with its own mask, so every backend
that reads a batch's mask runs attention over exactly the chosen keys."""

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from andrea.attention.masks.base import Mask


@dataclass(frozen=True, repr=False, eq=False)  # holds a tensor: equal only to itself
class Selected(Mask):
    chosen: Tensor  # (B, H or 1, T, S) True where query t (at position S - T + t) attends to key s
    kind: ClassVar[str] = "selected"
    batch_dependent: ClassVar[bool] = True
    head_dependent: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.chosen, Tensor) or self.chosen.dim() != 4 or self.chosen.dtype != torch.bool:
            raise ValueError("selected mask: chosen must be a (batch, heads or 1, queries, keys) boolean tensor")

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        """Every other key, and each query's own, for every query and head alike."""
        keys = torch.arange(seq)
        chosen = (keys.view(1, -1) % 2 == 0) | (keys.view(-1, 1) == keys.view(1, -1))
        return [cls(chosen.expand(batch, 1, seq, seq))]

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        chosen = self.chosen.to(kv_idx.device)
        batches, heads, queries, keys = chosen.shape  # one of each where every sequence or head chose alike
        return chosen[b % batches, h % heads, q_idx - (keys - queries), kv_idx]

    def dense(
        self,
        q_len: int,
        kv_len: int,
        *,
        batch_size: int = 1,
        num_heads: int = 1,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """The chosen keys of the last `q_len` queries over the first `kv_len` keys: (B, H or 1, T, S)."""
        _, heads, queries, keys = self.chosen.shape
        if kv_len != keys or q_len > queries:
            raise ValueError(f"selected mask: chosen for {queries} queries over {keys} keys, asked {q_len} x {kv_len}")
        chosen = self.chosen[:, :, queries - q_len :]
        if heads == 1 or num_heads == heads:
            return chosen.to(device) if device is not None else chosen
        raise ValueError(f"selected mask: chosen for {heads} heads, asked for {num_heads}")
