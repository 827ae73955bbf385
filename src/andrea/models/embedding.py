"""Token and position embeddings: idx (B, T) -> (B, T, D), shared by every model."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from andrea.attention.positions import POSITIONS
from andrea.core.hook_points import HookPoint


class Embeddings(nn.Module):
    """`sparse_grad`: the token lookup's gradient is the T rows it touched (a sparse tensor), not a
    dense (V, D) matrix that is zero but for them. Only for a table that gets a dense gradient from
    elsewhere in the same backward pass (GPT's tied LM head): autograd adds the rows into that one,
    which saves a (V, D) fill and a (V, D) sum every step. Alone, the optimizer would see a sparse
    gradient, which AdamW refuses."""

    kinds = tuple(POSITIONS)  # position.kind values; only "learned" lives here, the rest in attention

    def __init__(self, vocab_size: int, max_context: int, d_model: int, position: str = "learned") -> None:
        super().__init__()
        self.max_context, self.sparse_grad = max_context, False
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_context, d_model) if position == "learned" else None
        self.hook_embed, self.hook_pos_embed = HookPoint("hook_embed"), HookPoint("hook_pos_embed")

    def forward(self, idx: Tensor, start: int = 0) -> Tensor:
        """idx (B, T): the tokens at positions start .. start + T - 1 (start > 0 behind a KV cache); a learned
        position past max_context does not exist (without them, each layer keeps its own bounds)."""
        end = start + idx.shape[1]
        if self.position is not None and end > self.max_context:
            raise ValueError(f"sequence length {end} exceeds the model's max_context={self.max_context}")
        x = self.hook_embed(F.embedding(idx, self.token.weight, sparse=self.sparse_grad))  # (B, T, D)
        if self.position is not None:
            p = self.position(torch.arange(start, end, device=idx.device))  # (T, D), broadcast over B
            x = x + (self.hook_pos_embed(p.expand_as(x)) if self.hook_pos_embed.fns else p)
        return x

    def hook_points(self) -> dict[str, HookPoint]:
        """hook_embed (B, T, D), and hook_pos_embed (B, T, D) with learned positions."""
        points = {"hook_embed": self.hook_embed}
        return points if self.position is None else points | {"hook_pos_embed": self.hook_pos_embed}
