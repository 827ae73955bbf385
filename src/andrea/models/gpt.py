"""The ANDREA GPT family: a decoder-only transformer around the attention zoo (docs/spec.md §3-4).

    idx (B, T) -> token (+ learned position) embeddings -> n_layer x Block -> LayerNorm -> tied LM head
        -> logits (B, T, V)
    Block: x + attention(ln_1(x)), then x + mlp(ln_2(x))        (pre-norm, GPT-2 style)

Positions are a choice (`position`): learned absolute embeddings (GPT-2), RoPE
or ALiBi inside every attention layer, or none. Generation passes a KV cache
(`new_cache()`) and feeds only the new tokens.

By default every linear layer and LayerNorm is bias-free, so one attention layer holds
exactly 4 · d_model² parameters (docs/spec.md §3), and the MLP's GELU is exact. GPT-2's
own weights need `bias=True` (QKV, output projection, MLP and LayerNorm biases; the tied
LM head has none) and `activation="gelu_tanh"` (GPT-2's tanh approximation):
andrea.models.files.gpt2 loads them. The token embedding is tied to the LM head.
Initialisation follows GPT-2: N(0, 0.02), biases 0, with the projections that write
into the residual stream scaled by 1/sqrt(2 · n_layer).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from torch import Tensor, nn
from torch.nn import functional as F

from andrea.attention import MultiHeadSelfAttention
from andrea.core.hook_points import HookPoint, prefixed
from andrea.mixers import MixerCache, TokenMixer, build_mixers, resolve_layers
from andrea.models.embedding import Embeddings
from andrea.models.layer_norm import LayerNorm
from andrea.models.network import attention_layers
from andrea.models.settings import NET
from andrea.utils.rules import enforce

ACTIVATE: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
}  # model.net.activation (andrea.models.settings.ACTIVATIONS) -> the function


class MLP(nn.Module):
    """d_model -> mlp_ratio · d_model -> GELU (exact, or GPT-2's tanh approximation) or ReLU -> d_model."""

    def __init__(self, d_model: int, mlp_ratio: int, dropout: float, bias: bool, activation: str) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, mlp_ratio * d_model, bias=bias)
        self.proj = nn.Linear(mlp_ratio * d_model, d_model, bias=bias)  # writes into the residual stream
        self.dropout = nn.Dropout(dropout)
        self.activate = ACTIVATE[activation]
        self.hook_pre, self.hook_post = HookPoint("hook_pre"), HookPoint("hook_post")

    def forward(self, x: Tensor) -> Tensor:
        h = self.hook_post(self.activate(self.hook_pre(self.fc(x))))  # (B, T, 4D)
        return self.dropout(self.proj(h))  # (B, T, D)


class Block(nn.Module):
    """Pre-norm transformer block: the token mixer (attention, or andrea.mixers' others), then the MLP, each
    with a residual connection. The mixer sits at `attention` whatever its kind (its parameters' names)."""

    def __init__(
        self,
        d_model: int,
        mixer: nn.Module,
        mlp_ratio: int,
        dropout: float,
        bias: bool = False,
        activation: str = "gelu",
    ) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(d_model, bias=bias)
        self.attention = mixer
        self.ln_2 = LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, mlp_ratio, dropout, bias, activation)
        self.hook_resid_pre, self.hook_attn_out = HookPoint("hook_resid_pre"), HookPoint("hook_attn_out")
        self.hook_resid_mid, self.hook_mlp_out = HookPoint("hook_resid_mid"), HookPoint("hook_mlp_out")
        self.hook_resid_post = HookPoint("hook_resid_post")

    def forward(
        self, x: Tensor, return_weights: bool = False, cache: MixerCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        x = self.hook_resid_pre(x)  # (B, T, D)
        y, weights = self.mixer(self.ln_1(x), return_weights=return_weights, cache=cache)  # (B, T, D), (B, H, T, S)
        x = self.hook_resid_mid(x + self.hook_attn_out(y))
        x = self.hook_resid_post(x + self.hook_mlp_out(self.mlp(self.ln_2(x))))
        return x, weights

    @property
    def mixer(self) -> TokenMixer:
        return cast(TokenMixer, self.attention)

    def hook_points(self) -> dict[str, HookPoint]:
        """The block's residual stream and sublayer outputs (B, T, D), its LayerNorms' under `ln1.` and `ln2.`
        (andrea.models.layer_norm), its attention's under `attn.`, its MLP's under `mlp.` (hook_pre, hook_post:
        (B, T, mlp_ratio·D), before and after the GELU)."""
        mlp = {"mlp.hook_pre": self.mlp.hook_pre, "mlp.hook_post": self.mlp.hook_post}
        return (
            {"hook_resid_pre": self.hook_resid_pre}
            | prefixed(self.ln_1.hook_points(), "ln1.")
            | prefixed(self.mixer.hook_points(), "attn.")
            | {"hook_attn_out": self.hook_attn_out, "hook_resid_mid": self.hook_resid_mid}
            | prefixed(self.ln_2.hook_points(), "ln2.")
            | mlp
            | {"hook_mlp_out": self.hook_mlp_out, "hook_resid_post": self.hook_resid_post}
        )


class GPT(nn.Module):
    positions = Embeddings.kinds  # position.kind values it understands

    def __init__(
        self,
        vocab_size: int = 50257,
        max_context: int = 1024,
        n_layer: int = 12,
        d_model: int = 768,
        attention: dict[str, Any] | None = None,
        mixer: dict[str, Any] | None = None,
        layout: list[str] | None = None,
        kinds: dict[str, Any] | None = None,
        mlp_ratio: int = 4,
        dropout: float = 0.0,
        position: str = "learned",
        bias: bool = False,
        activation: str = "gelu",
    ) -> None:
        super().__init__()
        settings: dict[str, Any] = dict(vocab_size=vocab_size, max_context=max_context, n_layer=n_layer)
        settings |= dict(d_model=d_model, mlp_ratio=mlp_ratio, dropout=dropout, position=position)
        enforce(NET, settings | dict(bias=bias, activation=activation), "model.net.")
        attention = {"n_head": 12, **(attention or {}), "position": position}  # GPT-2 small's 12 heads by default
        place = dict(d_model=d_model, max_context=max_context, dropout=dropout, bias=bias)
        # one description per layer, read from here on
        self.layer_specs = resolve_layers(layout, n_layer, mixer, kinds, attention, place)
        mixers = build_mixers(self.layer_specs, **place)
        self.vocab_size, self.max_context, self.n_layer, self.d_model = vocab_size, max_context, n_layer, d_model
        self.embed = Embeddings(vocab_size, max_context, d_model, position)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, layer, mlp_ratio, dropout, bias, activation) for layer in mixers)
        self.ln_f = LayerNorm(d_model, bias=bias)  # its points: ln_final.hook_scale, ln_final.hook_normalized
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.embed.token.weight  # tied: one (V, D) matrix reads and writes tokens
        self.embed.sparse_grad = True  # the head's dense (V, D) gradient takes the lookup's T rows
        self.apply(self._init_weights)
        for block in self._blocks():
            for residual_out in (block.mixer.proj.weight, block.mlp.proj.weight):
                nn.init.normal_(residual_out, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def _blocks(self) -> list[Block]:
        """self.blocks, typed: an nn.ModuleList yields plain Modules, this one holds Blocks only."""
        return cast(list[Block], list(self.blocks))

    @property
    def mixers(self) -> list[TokenMixer]:
        """Every layer's token mixer, first to last."""
        return [block.mixer for block in self._blocks()]

    @property
    def attention(self) -> list[MultiHeadSelfAttention]:
        """Every layer's attention, for the tools that read heads (andrea.models.network.attention_layers)."""
        return attention_layers(self)

    def num_parameters(self, exclude_positions: bool = False) -> int:
        """Parameters, counted once (the tied embedding is one matrix)."""
        total = sum(p.numel() for p in self.parameters())
        if exclude_positions and self.embed.position is not None:
            total -= self.embed.position.weight.numel()
        return total

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward), nanoGPT's estimate: 6·N + 12·L·H·d·T,
        N the parameters without position embeddings (PaLM appendix B)."""
        return 6 * self.num_parameters(exclude_positions=True) + 12 * self.n_layer * self.d_model * seq_len

    def new_cache(self) -> list[MixerCache]:
        """An empty cache, one per layer, for `forward(..., cache=)`."""
        return [mixer.new_cache() for mixer in self.mixers]

    def forward(
        self, idx: Tensor, return_weights: bool = False, cache: list[MixerCache] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """idx (B, T) -> logits (B, T, V) and, when asked, one (B, H, T, S) weight tensor per layer.

        With a `cache`, idx holds only the tokens not yet seen (S - T of them are cached)."""
        start = 0 if cache is None else cache[0].next_position
        x = self.dropout(self.embed(idx, start))  # (B, T, D)
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, return_weights, None if cache is None else cache[i])
            if w is not None:
                weights.append(w)
        return self.lm_head(self.ln_f(x)), weights  # (B, T, V)

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by its name (docs/lens.md): embeddings, then each block's, then the final norm's."""
        points = dict(self.embed.hook_points())
        for i, block in enumerate(self._blocks()):
            points |= prefixed(block.hook_points(), f"blocks.{i}.")
        return points | prefixed(self.ln_f.hook_points(), "ln_final.")
