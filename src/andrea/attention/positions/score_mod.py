"""The score-modifier contract: an additive bias on the attention scores, defined as an index function.

Like a mask, a score modifier is written once with FlexAttention's index
signature, `bias(b, h, q_idx, kv_idx) -> float tensor`, added to the scaled
scores q·kᵀ·scale before the mask and the softmax. Backends that declare
`Capabilities(score_mod=True)` take it: as a dense (1, H, T, S) tensor (naive,
eager, sdpa) or as Flex's `score_mod`. Queries are aligned to the end of the
keys, as for masks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch
from torch import Tensor


class ScoreMod(ABC):
    """One score modifier. Subclasses are frozen dataclasses (hashable: they key Flex's caches)."""

    kind: ClassVar[str]

    @abstractmethod
    def bias(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """The additive bias for query `q_idx`, key `kv_idx`, head `h` (broadcasting index tensors)."""

    def dense(
        self,
        q_len: int,
        kv_len: int,
        *,
        num_heads: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> Tensor:
        """The bias as a tensor (1, H, T, S)."""
        b = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
        h = torch.arange(num_heads, device=device).view(1, -1, 1, 1)
        q_idx = torch.arange(kv_len - q_len, kv_len, device=device).view(1, 1, -1, 1)
        kv_idx = torch.arange(kv_len, device=device).view(1, 1, 1, -1)
        return self.bias(b, h, q_idx, kv_idx).to(dtype).expand(1, num_heads, q_len, kv_len)
