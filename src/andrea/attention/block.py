"""MultiHeadSelfAttention (docs/spec.md §2): (B, T, D) -> (B, T, D) with any backend, mechanism, mask, head
config and in-attention position scheme (RoPE, ALiBi), with an optional KV cache for generation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.contract import AttentionBackend, UnsupportedAttentionError, _alternatives
from andrea.attention.heads import HeadConfig
from andrea.attention.kv_cache import KVCache, LatentCache
from andrea.attention.latent import LatentAttention, latent_settings
from andrea.attention.masks import Mask, PrecomputedMask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import POSITIONS, ALiBi, Rotary
from andrea.attention.registry import as_backend, as_mask, as_mechanism


def shared_parts(attention: dict[str, Any]) -> dict[str, Any]:
    """A block's settings with the backend and mask built once, for every layer of a network to share
    (a backend name and its `backend_options` become the backend; a mask expression, the Mask). The
    mechanism stays a spec: each layer builds its own, with its own parameters."""
    parts = dict(attention)
    parts["backend"] = as_backend(parts.get("backend", "sdpa"), parts.pop("backend_options", None))
    parts["mask"] = as_mask(parts.get("mask", "causal"))
    return parts


class MultiHeadSelfAttention(nn.Module):
    """Fused QKV projection -> [mechanism.project] -> attention backend -> [mechanism.combine] -> output
    projection W_O.

    backend: a registry name ("naive", "eager", "sdpa", "flex", or a plugin's) or an instance.
    mechanism: what runs between scores and values (andrea.attention.mechanisms): a registry name
             ("softmax", "sigmoid", ...), a mapping with its name and settings, or None (softmax).
             `layer` / `n_layer` place the block in its network (differential attention's λ_init).
    mask:    a Mask, a mask expression such as "causal & sliding_window(window=64)", a registry name with
             its fields ({"name": "sliding_window", "window": 64}), or None (no mask).
    position: "rope" rotates q and k, "alibi" biases the scores; anything else
              ("learned", "none") leaves attention position-free (the embedding's job).
    latent:  multi-head latent attention's sizes (andrea.attention.latent: kv_rank, rope_dim, q_rank): keys and
             values from one latent per token, which is all the KV cache keeps; None: the fused QKV projection.
    A static mask is materialised once at `max_context` as a buffer and sliced per call.
    """

    mask_buffer: Tensor  # (1, H or 1, L, L), registered only for a mask that does not depend on the batch
    # Called on the heads' outputs z (B, H, T, d) before W_O mixes them; returns the z to use:
    # where interventions (andrea.lens.interventions: zero, scale or mean-ablate a head) plug in.
    hook_z: Callable[[Tensor], Tensor] | None = None

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int | None = None,
        backend: str | AttentionBackend = "sdpa",
        mask: Mask | str | Mapping[str, Any] | None = "causal",
        max_context: int = 1024,
        bias: bool = False,
        dropout: float = 0.0,
        backend_options: dict[str, Any] | None = None,
        position: str = "none",
        mechanism: str | Mapping[str, Any] | None = None,
        layer: int = 0,
        n_layer: int = 1,
        latent: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.heads = HeadConfig(n_head, n_head if n_kv_head is None else n_kv_head)
        self.d_model, self.head_dim = d_model, self.heads.head_dim(d_model)
        if not isinstance(max_context, int) or max_context <= 0:
            raise ValueError(f"max_context={max_context!r} must be a positive integer")
        self.max_context = max_context
        self.backend = as_backend(backend, backend_options)
        self.mask = as_mask(mask)
        if position not in POSITIONS:  # a typo would silently mean "no position" otherwise
            raise ValueError(f"position={position!r} is not one of {', '.join(POSITIONS)}")
        self.rope = Rotary(self.head_dim) if position == "rope" else None
        self.score_mod = ALiBi(n_head) if position == "alibi" else None
        # Refuse an impossible backend/mask/position combination now, not at the first batch; what depends on
        # the device (a GPU-only kernel) is checked in forward, where the device is known.
        self.backend.check(
            mask=self.mask, device=None, needs_grad=False, score_mod=self.score_mod, head_dim=self.head_dim
        )
        sizes = dict(n_head=n_head, head_dim=self.head_dim, d_model=d_model, max_context=max_context)
        self.mechanism: Mechanism = as_mechanism(mechanism, sizes | dict(layer=layer, n_layer=n_layer))
        self.backend.check_mechanism(self.mechanism)

        self.latent: LatentAttention | None = None
        if latent is None:
            self.qkv = nn.Linear(d_model, self.heads.qkv_features(self.head_dim), bias=bias)  # W_Q, W_K, W_V fused
        else:  # its own projections, with RoPE on their decoupled part only
            settings = latent_settings(latent)
            self.latent = LatentAttention(
                d_model, n_head, self.head_dim, **settings, rope=self.rope is not None, bias=bias
            )
            self.rope = None
            check_latent(self.heads, self.backend, self.mechanism)
        self.proj = nn.Linear(d_model, d_model, bias=bias)  # W_O: mixes the heads
        self.dropout = nn.Dropout(dropout)
        if not self.mask.batch_dependent:
            # (1, 1, L, L) True = attend; not a parameter, not saved in checkpoints, moves with .to()
            dense = self.mask.dense(max_context, max_context, num_heads=n_head)
            self.register_buffer("mask_buffer", dense, persistent=False)

    def forward(
        self, x: Tensor, mask: Mask | None = None, return_weights: bool = False, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) -> y (B, T, D) and, with return_weights, the weights (B, H, T, S), else None.

        `mask`, when given, is combined (AND) with the block's own mask: per-batch
        key padding or packed-document ids. With a `cache`, x holds only the new
        tokens; they attend to the S - T cached ones too, and join the cache.
        """
        B, T, D = x.shape
        if self.d_model != D:
            raise ValueError(f"input has d_model={D}, the block was built for {self.d_model}")
        if self.max_context < T:
            raise ValueError(f"sequence length {T} exceeds max_context={self.max_context}; raise max_context")
        full_mask = self._mask() if mask is None else self._mask() & mask
        # refused before any tensor work; the backend then computes without checking again
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or self.proj.weight.requires_grad)
        self.backend.check(mask=full_mask, device=x.device, needs_grad=needs_grad, score_mod=self.score_mod)

        q, k, v = self._qkv(x, cache)  # (B, H, T, d), (B, H_kv, S, d) x2: S counts the cached tokens too
        scale, mechanism = self.latent.scale if self.latent else self.mechanism.scale(), self.mechanism
        y, weights = self.backend.compute(q, k, v, full_mask, scale, return_weights, self.score_mod, mechanism)
        if cache is not None:
            cache.trim()
        if self.latent is not None and cache is not None:
            y = self.latent.unabsorb(y)  # (B, H, T, r) -> (B, H, T, d)
        y = self.mechanism.combine(y, x)  # (B, H, T, d): e.g. the output gate, differential attention's norm
        if self.hook_z is not None:
            y = self.hook_z(y)  # (B, H, T, d)
        y = y.transpose(1, 2).contiguous().view(B, T, D)  # (B, T, H, d) -> (B, T, D): heads side by side
        y = self.dropout(self.proj(y))  # (B, T, D)
        return y, weights

    def _qkv(self, x: Tensor, cache: KVCache | None) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D) -> q, k, v for the backend: positions applied, the cache extended with the new tokens.
        Latent attention: the expanded form, or with a cache the absorbed one (andrea.attention.latent)."""
        start = 0 if cache is None else cache.next_position  # absolute position of x's first token
        if self.latent is not None:
            q_c, q_r = self.latent.queries(x, start)  # (B, H, T, d), (B, H, T, d_R)
            latent = self.latent.latent(x, start)  # (B, 1, T, r + d_R)
            if cache is None:
                return self.latent.expand(q_c, q_r, latent)  # (B, H, T, d + d_R) x2, (B, H, T, d)
            latent, _ = cache.extend(latent, latent)
            return self.latent.absorb(q_c, q_r, latent)  # (B, H, T, r + d_R), (B, 1, S, r + d_R), (B, 1, S, r)
        q, k, v = self.heads.split_qkv(self.qkv(x), self.head_dim)  # (B, H, T, d), (B, H_kv, T, d) x2
        q, k = self.mechanism.project(q, k)  # e.g. QK-norm, before positions
        if self.rope is not None:
            q, k = self.rope(q, start), self.rope(k, start)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, H_kv, S, d) x2: cached tokens, then the new ones
        return q, k, v

    def _mask(self) -> Mask:
        if hasattr(self, "mask_buffer"):
            return PrecomputedMask(self.mask, self.mask_buffer)
        return self.mask

    def per_head_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """W_Q^h (H, D, d), W_K^h and W_V^h (H_kv, D, d): the per-head view of the fused projection."""
        if self.latent is not None:
            raise ValueError("heads=mla has no per-head W_K, W_V: its keys and values come from a shared latent")
        return self.heads.unfuse(self.qkv.weight.detach(), self.head_dim)

    @torch.no_grad()
    def load_per_head_weights(self, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> None:
        self.qkv.weight.copy_(self.heads.fuse(w_q, w_k, w_v))

    def extra_repr(self) -> str:
        h = self.heads
        return (
            f"d_model={self.d_model}, n_head={h.n_head}, n_kv_head={h.n_kv_head} ({self.head_kind}), "
            f"backend={self.backend.name}, mask={self.mask.name}, max_context={self.max_context}, "
            f"mechanism={self.mechanism.name}"
            + (", rope" if self.rope is not None else ", alibi" if self.score_mod is not None else "")
        )

    def new_cache(self) -> KVCache:
        """An empty cache for this layer, bounded when the mask's look-back is."""
        if self.latent is not None:
            return LatentCache(self.latent.kv_rank, self.mask.max_lookback)
        return KVCache(self.mask.max_lookback)

    @property
    def head_kind(self) -> str:
        """mha, gqa, mqa, or mla (latent attention)."""
        return "mla" if self.latent else self.heads.kind

    def cache_width(self) -> int:
        """Numbers the KV cache keeps per token for this layer: 2·H_kv·d, or latent attention's r + d_R."""
        return self.latent.cache_width() if self.latent else 2 * self.heads.n_kv_head * self.head_dim


def check_latent(heads: HeadConfig, backend: AttentionBackend, mechanism: Mechanism) -> None:
    """Refuse what latent attention cannot run with: grouped heads, a backend whose values must have the
    queries' size, a mechanism that changes q and k itself (QK-norm, differential attention)."""
    if heads.n_kv_head != heads.n_head:
        raise ValueError(
            f"heads=mla derives every head's keys and values from one latent: heads.n_kv_head={heads.n_kv_head} "
            f"must equal heads.n_head={heads.n_head}"
        )
    if not backend.capabilities.distinct_value_dim:
        raise UnsupportedAttentionError(
            f"attention backend '{backend.name}' needs values of the queries' size, which heads=mla's are not; "
            f"use {_alternatives(lambda c: c.distinct_value_dim)}"
        )
    if type(mechanism).project is not Mechanism.project or type(mechanism).scale is not Mechanism.scale:
        raise ValueError(
            f"mechanism={mechanism.name} changes queries and keys itself, which heads=mla's latent form cannot "
            "carry; use another mechanism (softmax, sigmoid, sink, gated, softcap) or another head configuration"
        )
