"""The ANDREA GPT family: a decoder-only transformer around the attention zoo (docs/spec.md §3-4).

    idx (B, T) -> token (+ learned position) embeddings [x sqrt(d_model)] -> n_layer x Block -> norm -> LM head
        -> logits (B, T, V) [soft-capped]
    Block: x + attention(ln_1(x)), then x + mlp(ln_2(x))        (pre-norm, GPT-2 style: the default)

Positions are a choice (`position`): learned absolute embeddings (GPT-2), RoPE
or ALiBi inside every attention layer, or none. Generation passes a KV cache
(`new_cache()`) and feeds only the new tokens.

By default every linear layer and LayerNorm is bias-free, so one attention layer holds
exactly 4 · d_model² parameters (docs/spec.md §3), and the MLP's GELU is exact. GPT-2's
own weights need `bias=True` (QKV, output projection, MLP and LayerNorm biases; the tied
LM head has none) and `activation="gelu_tanh"` (GPT-2's tanh approximation):
andrea.models.files.gpt2 loads them. The token embedding is tied to the LM head.
Initialisation follows GPT-2: N(0, 0.02), biases 0, with the projections that write
into the residual stream scaled by 1/sqrt(2 · n_layer); `init_std` sets the 0.02 (null: 1/sqrt(d_model)).

The parts of the field's other architectures are settings, each defaulting to GPT-2's: the norm (`norm`:
layernorm, rmsnorm, gemma_rmsnorm or none, with `norm_eps`; andrea.models.norms) and where it sits (`norm_place`:
pre, post or both; Block), a gated MLP (`activation`: swiglu, geglu) of any width (`d_mlp`; andrea.models.mlp),
an untied LM head (`tie_embeddings`), embeddings scaled by sqrt(d_model) (`embed_scale`, Gemma), a final
soft-cap of the logits (`logit_softcap`, Gemma 2), and MAD's autoencoder readout for its compression task
(`readout=pooled_last`: every position decoded from the last one's code; andrea.models.pooled_readout).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import torch
from torch import Tensor, nn

from andrea.attention import MultiHeadSelfAttention
from andrea.core.hook_points import HookPoint, prefixed
from andrea.mixers import MixerCache, TokenMixer, build_mixers, residual_writers, resolve_layers
from andrea.models.embedding import Embeddings
from andrea.models.mlp import MLP
from andrea.models.network import attention_layers
from andrea.models.norms import make_norm
from andrea.models.pooled_readout import PooledReadout
from andrea.models.settings import NET
from andrea.utils.rules import enforce


class Block(nn.Module):
    """A transformer block: the token mixer (attention, or andrea.mixers' others), then the MLP, each with a
    residual connection and norms before it (`pre`: GPT-2, Llama), after it (`post`: OLMo 2 and 3) or both (Gemma):

        pre    x + mixer(ln_1(x)),          then x + mlp(ln_2(x))
        post   x + ln_1_post(mixer(x)),     then x + ln_2_post(mlp(x))
        both   x + ln_1_post(mixer(ln_1(x))), then x + ln_2_post(mlp(ln_2(x)))

    The mixer sits at `attention` whatever its kind (its parameters' names)."""

    def __init__(self, mixer: nn.Module, mlp: MLP, norm: Callable[[], nn.Module], place: str = "pre") -> None:
        super().__init__()
        self.ln_1 = norm() if place != "post" else None
        self.attention = mixer
        self.ln_1_post = norm() if place != "pre" else None
        self.ln_2 = norm() if place != "post" else None
        self.mlp = mlp
        self.ln_2_post = norm() if place != "pre" else None
        self.hook_resid_pre, self.hook_attn_out = HookPoint("hook_resid_pre"), HookPoint("hook_attn_out")
        self.hook_resid_mid, self.hook_mlp_out = HookPoint("hook_resid_mid"), HookPoint("hook_mlp_out")
        self.hook_resid_post = HookPoint("hook_resid_post")

    def forward(
        self, x: Tensor, return_weights: bool = False, cache: MixerCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        x = self.hook_resid_pre(x)  # (B, T, D)
        y, weights = self.mixer(_normed(self.ln_1, x), return_weights=return_weights, cache=cache)  # (B, H, T, S)
        x = self.hook_resid_mid(x + self.hook_attn_out(_normed(self.ln_1_post, y)))
        y = _normed(self.ln_2_post, self.mlp(_normed(self.ln_2, x)))
        return self.hook_resid_post(x + self.hook_mlp_out(y)), weights

    @property
    def mixer(self) -> TokenMixer:
        return cast(TokenMixer, self.attention)

    def hook_points(self) -> dict[str, HookPoint]:
        """The block's residual stream and sublayer outputs (B, T, D), its norms' under `ln1.`, `ln2.` (and
        `ln1_post.`, `ln2_post.`; andrea.models.norms), its attention's under `attn.`, its MLP's under `mlp.`
        (andrea.models.mlp)."""
        norms = {"ln1.": self.ln_1, "ln1_post.": self.ln_1_post, "ln2.": self.ln_2, "ln2_post.": self.ln_2_post}
        points = {"hook_resid_pre": self.hook_resid_pre}
        points |= _norm_points(norms, "ln1.") | prefixed(self.mixer.hook_points(), "attn.")
        points |= _norm_points(norms, "ln1_post.") | {"hook_attn_out": self.hook_attn_out}
        points |= {"hook_resid_mid": self.hook_resid_mid} | _norm_points(norms, "ln2.")
        points |= prefixed(self.mlp.hook_points(), "mlp.") | _norm_points(norms, "ln2_post.")
        return points | {"hook_mlp_out": self.hook_mlp_out, "hook_resid_post": self.hook_resid_post}


def _normed(norm: nn.Module | None, x: Tensor) -> Tensor:
    return x if norm is None else norm(x)


def _norm_points(norms: dict[str, nn.Module | None], prefix: str) -> dict[str, HookPoint]:
    norm = norms[prefix]
    return {} if norm is None else prefixed(cast(Any, norm).hook_points(), prefix)


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
        d_mlp: int | None = None,
        norm: str = "layernorm",
        norm_eps: float = 1e-5,
        norm_place: str = "pre",
        tie_embeddings: bool = True,
        embed_scale: bool = False,
        logit_softcap: float | None = None,
        init_std: float | None = 0.02,
        readout: str = "next_token",
    ) -> None:
        super().__init__()
        settings: dict[str, Any] = dict(vocab_size=vocab_size, max_context=max_context, n_layer=n_layer)
        settings |= dict(d_model=d_model, mlp_ratio=mlp_ratio, dropout=dropout, position=position)
        parts = dict(bias=bias, activation=activation, d_mlp=d_mlp, norm=norm, norm_eps=norm_eps)
        parts |= dict(norm_place=norm_place, tie_embeddings=tie_embeddings, embed_scale=embed_scale)
        enforce(NET, settings | parts | dict(logit_softcap=logit_softcap, init_std=init_std, readout=readout),
                "model.net.")  # fmt: skip
        attention = {"n_head": 12, **(attention or {}), "position": position}  # GPT-2 small's 12 heads by default
        place = dict(d_model=d_model, max_context=max_context, dropout=dropout, bias=bias)
        # one description per layer, read from here on
        self.layer_specs = resolve_layers(layout, n_layer, mixer, kinds, attention, place)
        mixers = build_mixers(self.layer_specs, **place)
        self.vocab_size, self.max_context, self.n_layer, self.d_model = vocab_size, max_context, n_layer, d_model
        self.embed_scale, self.logit_softcap = embed_scale, logit_softcap
        self.embed = Embeddings(vocab_size, max_context, d_model, position)
        self.dropout = nn.Dropout(dropout)
        make = partial(make_norm, norm, d_model, norm_eps, bias)
        width = d_mlp or mlp_ratio * d_model
        self.blocks = nn.ModuleList(
            Block(layer, MLP(d_model, width, dropout, bias, activation), make, norm_place) for layer in mixers
        )
        self.readout = PooledReadout(d_model, max_context, make) if readout == "pooled_last" else None
        self.ln_f = make()  # its points: ln_final.hook_scale, ln_final.hook_normalized
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.lm_head.weight = self.embed.token.weight  # one (V, D) matrix reads and writes tokens
            self.embed.sparse_grad = True  # the head's dense (V, D) gradient takes the lookup's T rows
        std = d_model**-0.5 if init_std is None else init_std
        self.apply(partial(self._init_weights, std=std))
        for block in self._blocks():
            for residual_out in (*residual_writers(block.mixer), block.mlp.proj):
                nn.init.normal_(residual_out.weight, mean=0.0, std=std / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module, std: float) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
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
        if cache is not None and self.readout is not None:
            raise ValueError(
                "model.net.readout=pooled_last decodes every position from the last one: it has no next token to "
                "generate from a cache; sample a model with model.net.readout=next_token"
            )
        start = 0 if cache is None else cache[0].next_position
        x = self.embed(idx, start)  # (B, T, D)
        if self.embed_scale:  # Gemma: sqrt(d_model), rounded to the embedding's dtype as Gemma's code does
            x = x * torch.tensor(self.d_model**0.5, dtype=x.dtype)
        x = self.dropout(x)
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, return_weights, None if cache is None else cache[i])
            if w is not None:
                weights.append(w)
        if self.readout is not None:  # MAD's autoencoder: every position rebuilt from the last one's code
            x = self.readout(x)
        return self.unembed(x), weights

    def unembed(self, x: Tensor) -> Tensor:
        """(..., D) a residual stream -> logits (..., V): the final norm, the LM head, and Gemma 2's soft-cap."""
        logits = self.lm_head(self.ln_f(x))
        if self.logit_softcap is not None:  # Gemma 2's final soft-cap: c · tanh(logits / c)
            logits = self.logit_softcap * torch.tanh(logits / self.logit_softcap)
        return logits

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by its name (docs/lens.md): embeddings, then each block's, then the final norm's."""
        points = dict(self.embed.hook_points())
        for i, block in enumerate(self._blocks()):
            points |= prefixed(block.hook_points(), f"blocks.{i}.")
        if self.readout is not None:
            points["readout.hook_code"] = self.readout.hook_code
        return points | prefixed(cast(Any, self.ln_f).hook_points(), "ln_final.")
