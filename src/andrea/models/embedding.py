"""Token and position embeddings: idx (B, T) -> (B, T, D), shared by every model."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from andrea.attention.positions import POSITIONS


class Embeddings(nn.Module):
    kinds = tuple(POSITIONS)  # position.kind values; only "learned" lives here, the rest in attention

    def __init__(self, vocab_size: int, max_context: int, d_model: int, position: str = "learned") -> None:
        super().__init__()
        if position not in self.kinds:
            raise ValueError(f"position.kind={position!r} is not one of {', '.join(self.kinds)}")
        self.max_context = max_context
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_context, d_model) if position == "learned" else None

    def forward(self, idx: Tensor, start: int = 0) -> Tensor:
        """idx (B, T): the tokens at positions start .. start + T - 1 (start > 0 behind a KV cache)."""
        end = start + idx.shape[1]
        if end > self.max_context:
            raise ValueError(f"sequence length {end} exceeds the model's max_context={self.max_context}")
        x = self.token(idx)  # (B, T, D)
        if self.position is not None:
            x = x + self.position(torch.arange(start, end, device=idx.device))  # (T, D) broadcast over B
        return x
