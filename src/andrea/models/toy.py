"""The lesson's toy model (docs/spec.md §5): token + position embeddings, attention, LM head.

    idx (B, T) -> embeddings (B, T, D) -> n_layer x [x + attention(norm(x))] -> norm -> logits (B, T, V)

Attention only, no MLP: whatever the model learns beyond the current token, it
learns through its heads. `attention=None` removes every attention block, the
ablation that shows the repetition task does not need attention.
"""

from __future__ import annotations

from typing import Any, cast

from torch import Tensor, nn

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.block import shared_parts
from andrea.attention.kv_cache import KVCache
from andrea.models.embedding import Embeddings
from andrea.models.settings import NET
from andrea.utils.rules import enforce


class ToyModel(nn.Module):
    positions = Embeddings.kinds  # position.kind values it understands

    def __init__(
        self,
        vocab_size: int,
        max_context: int,
        d_model: int = 32,
        n_layer: int = 1,
        attention: dict[str, Any] | None = None,
        position: str = "learned",
    ) -> None:
        super().__init__()
        settings = dict(vocab_size=vocab_size, max_context=max_context, d_model=d_model, n_layer=n_layer)
        enforce(NET, settings | {"position": position}, "model.net.")
        self.vocab_size, self.max_context = vocab_size, max_context
        self.embed = Embeddings(vocab_size, max_context, d_model, position)
        blocks = [] if attention is None else range(n_layer)
        shared = {} if attention is None else shared_parts(attention)  # one backend and one mask for every layer
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in blocks)
        self.attention = nn.ModuleList(
            MultiHeadSelfAttention(
                d_model, max_context=max_context, **shared, position=position, layer=i, n_layer=n_layer
            )
            for i in blocks  # none when attention is None
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    @property
    def n_layer(self) -> int:
        return len(self.attention)

    def _layers(self) -> list[MultiHeadSelfAttention]:
        """self.attention, typed: an nn.ModuleList yields plain Modules, this one holds attention layers only."""
        return cast(list[MultiHeadSelfAttention], list(self.attention))

    def new_cache(self) -> list[KVCache]:
        """An empty KV cache, one per layer, for `forward(..., cache=)`."""
        return [attention.new_cache() for attention in self._layers()]

    def forward(
        self, idx: Tensor, return_weights: bool = False, cache: list[KVCache] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """idx (B, T) -> logits (B, T, V) and, when asked, one (B, H, T, S) weight tensor per layer.

        With a `cache`, idx holds only the tokens not yet seen."""
        start = 0 if cache is None or not cache else cache[0].next_position
        x = self.embed(idx, start)  # (B, T, D)
        weights = []
        for i, (norm, attention) in enumerate(zip(self.norms, self.attention, strict=True)):
            layer_cache = None if cache is None else cache[i]
            y, w = attention(norm(x), return_weights=return_weights, cache=layer_cache)  # (B, T, D), (B, H, T, S)
            if w is not None:
                weights.append(w)
            x = x + y  # residual
        return self.lm_head(self.final_norm(x)), weights  # (B, T, V)
