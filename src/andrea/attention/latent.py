"""Multi-head latent attention (MLA; DeepSeek-AI, "DeepSeek-V2", 2024, §2.1): keys and values come from one
low-rank latent per token, and the KV cache holds that latent instead of every head's keys and values.

    c_KV = RMSNorm(W_DKV x)                    (B, T, r)       the joint key/value latent: r = kv_rank; the
                                                               RMSNorms' eps is norm_eps (DeepSeek-V2/V3: 1e-6)
    k_C^h = W_UK^h c_KV,  v^h = W_UV^h c_KV     (B, H, T, d)    every head's keys and values, up-projected
    k_R = RoPE(W_KR x)                          (B, 1, T, d_R)  one rotary key shared by the heads
    q^h = [q_C^h ; RoPE(q_R^h)] = W_UQ c_Q      (B, H, T, d + d_R), c_Q = RMSNorm(W_DQ x) (or x: q_rank null)
    k^h = [k_C^h ; k_R]                         scores q^h·k^h / sqrt(d + d_R)

RoPE rotates only the decoupled d_R dimensions: rotating k_C would tie W_UK to the position and stop it from
being absorbed. Without RoPE (position none or learned) a d_R > 0 is a key part shared by the heads and left
unturned, as Kimi Linear's latent attention (NoPE) keeps it.

The **absorbed** form, for decoding, never expands the cache: q_C^h·k_C^h = (W_UK^hᵀ q_C^h)·c_KV, so every head
attends with the query [W_UK^hᵀ q_C^h ; q_R^h] (r + d_R) to the one shared key [c_KV ; k_R] and value c_KV
(multi-query attention), and its output is up-projected by W_UV^h afterwards. Per token and layer the cache holds
r + d_R numbers, against 2·H_kv·d for MHA/GQA/MQA.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.advice import _alternatives
from andrea.attention.contract import AttentionBackend, UnsupportedAttentionError
from andrea.attention.heads import HeadConfig
from andrea.attention.kv_cache import KVCache, LatentCache
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import Rotary
from andrea.core.hook_points import HookPoint
from andrea.utils.rules import POSITIVE, enforce, integer, number, optional, problem_of

SETTINGS = {
    "kv_rank": POSITIVE,
    "rope_dim": optional(integer(0)),
    "q_rank": optional(POSITIVE),
    "norm_eps": optional(number(0, low_open=True)),  # null: torch's default, the dtype's machine epsilon
}
NORM_EPS = 1e-6  # DeepSeek-V2 and V3's rms_norm_eps


def _rope_dim(given: int | None, head_dim: int, rope: bool) -> int:
    """d_R: the given one, or null's (head_dim / 2 with RoPE, 0 without), checked against the position scheme.
    Without RoPE a given d_R is the shared key part left unturned (Kimi Linear's latent attention, NoPE)."""
    rope_dim = (head_dim // 2 if rope else 0) if given is None else given
    if rope and rope_dim % 2:  # Rotary would name the head_dim, which is not what is odd
        source = f" (null: head_dim / 2 = {head_dim} / 2)" if given is None else ""
        raise ValueError(
            f"heads.latent.rope_dim={rope_dim}{source} must be even: RoPE turns its channels in pairs; "
            "give an even heads.latent.rope_dim"
        )
    if rope and not rope_dim:
        raise ValueError("heads=mla with position=rope needs heads.latent.rope_dim > 0 (its decoupled RoPE key)")
    return rope_dim


class LatentAttention(nn.Module):
    """The projections of latent attention for H heads of size d: queries, the latent, and the two forms."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        head_dim: int,
        kv_rank: int,
        rope_dim: int | None = None,
        q_rank: int | None = None,
        rope: bool = False,
        bias: bool = False,
        norm_eps: float | None = NORM_EPS,
        rope_base: float = 10000.0,
    ) -> None:
        """rope_dim (d_R) null: head_dim / 2 with RoPE, 0 without (learned or no positions need no
        decoupled key); q_rank (d_c') null: full-rank queries, as DeepSeek-V2-Lite; norm_eps: the latents'
        RMSNorm eps (null: torch's default, what files of format 1 were trained with)."""
        super().__init__()
        settings = dict(kv_rank=kv_rank, rope_dim=rope_dim, q_rank=q_rank, norm_eps=norm_eps)
        enforce(SETTINGS, settings, "heads.latent.")
        rope_dim = _rope_dim(rope_dim, head_dim, rope)
        self.n_head, self.head_dim, self.kv_rank, self.rope_dim = n_head, head_dim, kv_rank, rope_dim
        H, d, r, d_r = n_head, head_dim, kv_rank, rope_dim
        self.q_down = nn.Linear(d_model, q_rank, bias=bias) if q_rank else None  # W_DQ
        self.q_norm = nn.RMSNorm(q_rank, eps=norm_eps) if q_rank else None
        self.q_up = nn.Linear(q_rank or d_model, H * (d + d_r), bias=bias)  # W_UQ and W_QR, per head side by side
        self.kv_down = nn.Linear(d_model, r + d_r, bias=bias)  # W_DKV and W_KR: the latent and the rotary key
        self.kv_norm = nn.RMSNorm(r, eps=norm_eps)
        self.kv_up = nn.Linear(r, 2 * H * d, bias=False)  # W_UK then W_UV: linear, so they can be absorbed
        self.rotary = Rotary(d_r, base=rope_base) if d_r and rope else None

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim + self.rope_dim)

    def cache_width(self) -> int:
        """Numbers the KV cache keeps per token and layer: r + d_R."""
        return self.kv_rank + self.rope_dim

    def query_latent(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> c_Q = RMSNorm(W_DQ x) (B, T, d_c'), or x itself for full-rank queries."""
        return x if self.q_down is None or self.q_norm is None else self.q_norm(self.q_down(x))

    def queries(self, x: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """x (B, T, D) -> q_C (B, H, T, d) and the rotated q_R (B, H, T, d_R), at positions start.."""
        B, T, _ = x.shape
        c_q = self.query_latent(x)  # (B, T, d_c')
        q = self.q_up(c_q).view(B, T, self.n_head, -1).transpose(1, 2)  # (B, H, T, d + d_R)
        q_c, q_r = q.split([self.head_dim, self.rope_dim], dim=-1)
        return q_c, q_r if self.rotary is None else self.rotary(q_r, start)

    def latent(self, x: Tensor, start: int) -> Tensor:
        """x (B, T, D) -> [c_KV ; k_R] (B, 1, T, r + d_R): what the cache keeps of each token."""
        c, k_r = self.kv_down(x).unsqueeze(1).split([self.kv_rank, self.rope_dim], dim=-1)  # (B, 1, T, r), d_R
        k_r = k_r if self.rotary is None else self.rotary(k_r, start)
        return torch.cat((self.kv_norm(c), k_r), dim=-1)

    def expand(self, q_c: Tensor, q_r: Tensor, latent: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The expanded form: q (B, H, T, d + d_R), k (B, H, S, d + d_R), v (B, H, S, d), as in training."""
        B, _, S, _ = latent.shape
        c, k_r = latent.split([self.kv_rank, self.rope_dim], dim=-1)  # (B, 1, S, r), (B, 1, S, d_R)
        kv = self.kv_up(c).view(B, S, 2, self.n_head, self.head_dim)  # (B, S, 2, H, d)
        k_c, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)  # (B, H, S, d) each
        k = torch.cat((k_c, k_r.expand(B, self.n_head, S, self.rope_dim)), dim=-1)  # (B, H, S, d + d_R)
        return torch.cat((q_c, q_r), dim=-1), k, v

    def absorb(self, q_c: Tensor, q_r: Tensor, latent: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The absorbed form: q (B, H, T, r + d_R) against the one shared key (B, 1, S, r + d_R) and value
        c_KV (B, 1, S, r); the heads' outputs (B, H, T, r) then go through `unabsorb`."""
        w_uk = self.kv_up.weight[: self.n_head * self.head_dim].view(self.n_head, self.head_dim, self.kv_rank)
        q_latent = q_c @ w_uk  # (B, H, T, d) @ (H, d, r) -> (B, H, T, r): W_UK^hᵀ q_C^h
        return torch.cat((q_latent, q_r), dim=-1), latent, latent[..., : self.kv_rank]

    def unabsorb(self, z: Tensor) -> Tensor:
        """(B, H, T, r) outputs over the latent -> (B, H, T, d): W_UV^h applied after the weighted sum."""
        w_uv = self.kv_up.weight[self.n_head * self.head_dim :].view(self.n_head, self.head_dim, self.kv_rank)
        return z @ w_uv.transpose(1, 2)  # (B, H, T, r) @ (H, r, d)

    kind = "mla"

    def project(
        self, x: Tensor, start: int, cache: KVCache | None, points: Mapping[str, HookPoint], mechanism: Mechanism
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D) at positions start.. -> q, k, v for the backend (FusedQKV's call): the expanded form, seen
        by hook_q/k/v, or with a cache the absorbed one. `mechanism` is one that leaves q and k (check_latent)."""
        q_c, q_r = self.queries(x, start)  # (B, H, T, d), (B, H, T, d_R)
        latent = self.latent(x, start)  # (B, 1, T, r + d_R)
        if cache is None:
            q, k, v = self.expand(q_c, q_r, latent)  # (B, H, T, d + d_R) x2, (B, H, T, d)
            return points["hook_q"].heads(q), points["hook_k"].heads(k), points["hook_v"].heads(v)
        latent, _ = cache.extend(latent, latent)
        return self.absorb(q_c, q_r, latent)  # (B, H, T, r + d_R), (B, 1, S, r + d_R), (B, 1, S, r)

    def finish(self, z: Tensor, cache: KVCache | None) -> Tensor:
        """The heads' outputs as W_O reads them: (B, H, T, d), up-projected from the absorbed form's r."""
        return z if cache is None else self.unabsorb(z)

    def new_cache(self, max_lookback: int | None) -> KVCache:
        return LatentCache(self.kv_rank, max_lookback)

    @staticmethod
    def skipped_points() -> set[str]:
        return {"hook_rot_q", "hook_rot_k"}  # RoPE turns only the decoupled part, inside the projections

    def per_head_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        raise ValueError("heads=mla has no per-head W_K, W_V: its keys and values come from a shared latent")

    def load_per_head_weights(self, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> None:
        self.per_head_weights()

    def extra_repr(self) -> str:
        return f"kv_rank={self.kv_rank}, rope_dim={self.rope_dim}, q_rank={self.q_down and self.q_down.out_features}"


def settings_problem(latent: Any) -> tuple[str, str] | None:
    """What is wrong with a `latent` setting (a mapping of kv_rank, rope_dim, q_rank), as (the key under
    `latent`, e.g. ".kv_rank", and the problem), or None."""
    if not isinstance(latent, Mapping):
        return "", f"={latent!r} must be a mapping of {', '.join(SETTINGS)}"
    for key in latent:
        if key not in SETTINGS:
            return f".{key}", f"is not a setting of latent attention ({', '.join(SETTINGS)})"
    problem = problem_of(SETTINGS, latent, ".")
    return None if problem is None else (problem.key, problem.problem)


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
    changes = [type(mechanism).project, type(mechanism).scale, type(mechanism).extend]
    if changes != [Mechanism.project, Mechanism.scale, Mechanism.extend]:
        raise ValueError(
            f"mechanism={mechanism.name} changes queries and keys itself, which heads=mla's latent form cannot "
            "carry; use another mechanism (softmax, sigmoid, sink, gated, softcap) or another head configuration"
        )
