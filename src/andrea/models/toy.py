"""The lesson's toy model (docs/spec.md §5): token + position embeddings, attention, LM head.

    idx (B, T) -> embeddings (B, T, D) -> n_layer x [x + attention(norm(x))] -> norm -> logits (B, T, V)

Attention only, no MLP: whatever the model learns beyond the current token, it
learns through its heads. `attention=None` removes every attention block, the
ablation that shows the repetition task does not need attention.
"""

from __future__ import annotations

from typing import Any, cast

from torch import Tensor, nn

from andrea.core.hook_points import HookPoint, prefixed
from andrea.mixers import MixerCache, TokenMixer, build_mixers, resolve_layers
from andrea.models.embedding import Embeddings
from andrea.models.layer_norm import LayerNorm
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
        mixer: dict[str, Any] | None = None,
        layout: list[str] | None = None,
        kinds: dict[str, Any] | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        settings = dict(vocab_size=vocab_size, max_context=max_context, d_model=d_model, n_layer=n_layer)
        enforce(NET, settings | {"position": position, "dropout": dropout}, "model.net.")
        self.vocab_size, self.max_context = vocab_size, max_context
        self.embed = Embeddings(vocab_size, max_context, d_model, position)
        self.dropout = nn.Dropout(dropout)  # on the embeddings; each mixer drops its own weights and output
        # one description per layer, read from here on; no layers when attention is None
        place = dict(d_model=d_model, max_context=max_context, dropout=dropout)
        self.layer_specs = (
            () if attention is None
            else resolve_layers(layout, n_layer, mixer, kinds, {**attention, "position": position}, place)
        )  # fmt: skip
        blocks = range(len(self.layer_specs))
        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in blocks)
        mixers = build_mixers(self.layer_specs, **place)
        self.attention = nn.ModuleList(mixers)  # each layer's mixer, attention or another (its parameters' names)
        self.final_norm = LayerNorm(d_model)  # its points: ln_final.hook_scale, ln_final.hook_normalized
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        # each layer's residual stream before and after it, and what its attention adds (B, T, D)
        self.hook_resid_pre = [HookPoint("hook_resid_pre") for _ in blocks]
        self.hook_attn_out = [HookPoint("hook_attn_out") for _ in blocks]
        self.hook_resid_post = [HookPoint("hook_resid_post") for _ in blocks]

    @property
    def n_layer(self) -> int:
        return len(self.attention)

    @property
    def mixers(self) -> list[TokenMixer]:
        """Every layer's token mixer, first to last (self.attention, typed: an nn.ModuleList yields Modules)."""
        return cast(list[TokenMixer], list(self.attention))

    def new_cache(self) -> list[MixerCache]:
        """An empty cache, one per layer, for `forward(..., cache=)`."""
        return [mixer.new_cache() for mixer in self.mixers]

    def forward(
        self, idx: Tensor, return_weights: bool = False, cache: list[MixerCache] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """idx (B, T) -> logits (B, T, V) and, when asked, one (B, H, T, S) weight tensor per layer.

        With a `cache`, idx holds only the tokens not yet seen."""
        start = 0 if cache is None or not cache else cache[0].next_position
        x = self.dropout(self.embed(idx, start))  # (B, T, D)
        weights = []
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers, strict=True)):
            layer_cache = None if cache is None else cache[i]
            x = self.hook_resid_pre[i](x)
            y, w = mixer(norm(x), return_weights=return_weights, cache=layer_cache)  # (B, T, D), (B, H, T, S)
            if w is not None:
                weights.append(w)
            x = self.hook_resid_post[i](x + self.hook_attn_out[i](y))  # residual
        return self.unembed(x), weights  # (B, T, V)

    def unembed(self, x: Tensor) -> Tensor:
        """(..., D) a residual stream -> logits (..., V): the final norm and the LM head."""
        return self.lm_head(self.final_norm(x))

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by its name (docs/lens.md): a layer is `blocks.<i>.`, as in the GPT, without an MLP."""
        points = dict(self.embed.hook_points())
        for i, mixer in enumerate(self.mixers):
            norm = cast(LayerNorm, self.norms[i])
            layer = {"hook_resid_pre": self.hook_resid_pre[i]} | prefixed(norm.hook_points(), "ln1.")
            layer |= prefixed(mixer.hook_points(), "attn.")
            layer |= {"hook_attn_out": self.hook_attn_out[i], "hook_resid_post": self.hook_resid_post[i]}
            points |= prefixed(layer, f"blocks.{i}.")
        return points | prefixed(self.final_norm.hook_points(), "ln_final.")
