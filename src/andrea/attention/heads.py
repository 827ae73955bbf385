"""Head configurations (MHA, GQA, MQA) and the layout of the fused QKV projection.

One Linear maps D -> (n_head + 2·n_kv_head)·d_head. Its output rows hold, in
order: every query head, every key head, every value head, each head's d_head
rows side by side. For MHA that is docs/spec.md §2's stack of W_Q, W_K, W_V (3D, D).
Per-head view (docs/spec.md §2): Q_h = X W_Q^h with W_Q^h of shape (d_model, d_head);
nn.Linear stores the transpose, so W_Q^h is rows h·d_head .. (h+1)·d_head of
the fused weight, transposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from andrea.attention.kv_cache import KVCache
from andrea.utils.rules import SettingError

if TYPE_CHECKING:
    from andrea.attention.mechanisms import Mechanism
    from andrea.attention.positions import Rotary
    from andrea.attention.positions.temperature import QueryTemperature
    from andrea.core.hook_points import HookPoint


def heads_problem(
    n_head: Any, n_kv_head: Any, head_key: str = "heads.n_head", kv_key: str = "heads.n_kv_head"
) -> SettingError | None:
    """What is wrong with n_head query heads sharing n_kv_head key/value heads (None: nothing), keyed as named."""
    for key, value in ((head_key, n_head), (kv_key, n_kv_head)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return SettingError(key, f"={value!r} must be a positive integer")
    if n_head % n_kv_head != 0:
        divisors = [d for d in range(1, n_head + 1) if n_head % d == 0]
        return SettingError(
            kv_key,
            f"={n_kv_head} does not divide {head_key}={n_head}; choose one of {divisors} ({n_head} = MHA, 1 = MQA)",
        )
    return None


@dataclass(frozen=True)
class HeadConfig:
    n_head: int
    n_kv_head: int

    def __post_init__(self) -> None:
        problem = heads_problem(self.n_head, self.n_kv_head)
        if problem:
            raise problem

    def head_dim(self, d_model: int, key: str = "d_model") -> int:
        """d_model // n_head, refusing a width the heads do not split evenly."""
        problem = self.width_problem(d_model, key)
        if problem:
            raise problem
        return d_model // self.n_head

    def width_problem(self, d_model: Any, key: str = "d_model", head_key: str = "heads.n_head") -> SettingError | None:
        """What is wrong with a width of d_model for these heads (None: it splits evenly); `head_key` names the
        heads' setting."""
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model <= 0:
            return SettingError(key, f"={d_model!r} must be a positive integer")
        if d_model % self.n_head:
            divisors = [h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0]
            return SettingError(
                key, f"={d_model} is not divisible by {head_key}={self.n_head}; choose n_head among {divisors}"
            )
        return None

    @property
    def kind(self) -> str:
        if self.n_kv_head == self.n_head:
            return "mha"
        return "mqa" if self.n_kv_head == 1 else "gqa"

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head."""
        return self.n_head // self.n_kv_head

    def qkv_features(self, head_dim: int) -> int:
        return (self.n_head + 2 * self.n_kv_head) * head_dim

    def split_qkv(self, qkv: Tensor, head_dim: int) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, (H + 2·H_kv)·d) -> q (B, H, T, d), k (B, H_kv, T, d), v (B, H_kv, T, d)."""
        B, T, _ = qkv.shape
        q, k, v = qkv.split([self.n_head * head_dim, self.n_kv_head * head_dim, self.n_kv_head * head_dim], dim=-1)
        q = q.view(B, T, self.n_head, head_dim).transpose(1, 2)  # (B, H, T, d)
        k = k.view(B, T, self.n_kv_head, head_dim).transpose(1, 2)  # (B, H_kv, T, d)
        v = v.view(B, T, self.n_kv_head, head_dim).transpose(1, 2)  # (B, H_kv, T, d)
        return q, k, v

    def fuse(self, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> Tensor:
        """Per-head weights -> the fused nn.Linear weight ((H + 2·H_kv)·d, D).

        w_q: (H, D, d), w_k and w_v: (H_kv, D, d), each [h] being W^h of docs/spec.md §2.
        """
        if w_q.shape[0] != self.n_head or w_k.shape[0] != self.n_kv_head or w_v.shape[0] != self.n_kv_head:
            raise ValueError(
                f"per-head weights give {w_q.shape[0]}/{w_k.shape[0]}/{w_v.shape[0]} q/k/v heads, "
                f"expected {self.n_head}/{self.n_kv_head}/{self.n_kv_head}"
            )
        per_head = torch.cat([w_q, w_k, w_v], dim=0)  # (H + 2·H_kv, D, d)
        return per_head.transpose(1, 2).reshape(-1, per_head.shape[1])  # ((H + 2·H_kv)·d, D)

    def unfuse(self, weight: Tensor, head_dim: int) -> tuple[Tensor, Tensor, Tensor]:
        """The fused weight ((H + 2·H_kv)·d, D) -> per-head w_q (H, D, d), w_k, w_v (H_kv, D, d)."""
        expected = self.qkv_features(head_dim)
        if weight.shape[0] != expected:
            raise ValueError(f"fused QKV weight has {weight.shape[0]} rows, expected {expected}")
        per_head = weight.view(-1, head_dim, weight.shape[1]).transpose(1, 2)  # (H + 2·H_kv, D, d)
        return tuple(per_head.split([self.n_head, self.n_kv_head, self.n_kv_head], dim=0))


def mha(n_head: int) -> HeadConfig:
    """Multi-head attention: every query head has its own key and value head."""
    return HeadConfig(n_head, n_head)


def gqa(n_head: int, n_kv_head: int) -> HeadConfig:
    """Grouped-query attention: groups of query heads share a key/value head."""
    return HeadConfig(n_head, n_kv_head)


def mqa(n_head: int) -> HeadConfig:
    """Multi-query attention: all query heads share one key/value head."""
    return HeadConfig(n_head, 1)


class FusedQKV(nn.Linear):
    """The inputs of MHA, GQA and MQA heads: W_Q, W_K, W_V as one Linear (the layout above), the mechanism's
    projection (QK-norm) and RoPE. Latent attention's inputs (andrea.attention.latent) answer the same calls:

        project(x, start, cache, points, mechanism) -> q (B, H, T, d), k, v (B, H_kv, S, d)
        finish(z, cache) -> z          the heads' outputs (B, H, T, d) as W_O reads them
        scale, kind, cache_width(), new_cache(max_lookback), skipped_points()
    """

    scale = None  # the mechanism's (or the contract's 1/sqrt(d))

    def __init__(
        self, d_model: int, heads: HeadConfig, head_dim: int, bias: bool, rope: Rotary | None,
        temperature: QueryTemperature | None = None,
    ) -> None:  # fmt: skip
        super().__init__(d_model, heads.qkv_features(head_dim), bias=bias)
        self.heads, self.head_dim, self.rope, self.temperature = heads, head_dim, rope, temperature

    @property
    def kind(self) -> str:
        return self.heads.kind

    def project(
        self, x: Tensor, start: int, cache: KVCache | None, points: Mapping[str, HookPoint], mechanism: Mechanism
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D) at positions start.. -> q (B, H, T, d), k and v (B, H_kv, S, d), S counting the cached
        tokens too; each passes its hook point as the projection gives it, q and k again after RoPE (and the
        queries' temperature, where the layer has one)."""
        q, k, v = self.heads.split_qkv(self(x), self.head_dim)  # (B, H, T, d), (B, H_kv, T, d) x2
        q, k, v = points["hook_q"].heads(q), points["hook_k"].heads(k), points["hook_v"].heads(v)
        q, k = mechanism.project(q, k, x)  # e.g. QK-norm, before positions
        in_cache = cache is not None and cache.rotate_cached  # a streaming cache numbers positions within itself
        if self.rope is not None and not in_cache:
            q, k = points["hook_rot_q"].heads(self.rope(q, start)), points["hook_rot_k"].heads(self.rope(k, start))
        q, k = mechanism.extend(q, k, x, None if cache is None else cache.k)  # e.g. forgetting attention's gate
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, H_kv, S, d) x2: cached tokens, then the new ones
        if self.rope is not None and in_cache:  # every key at its place in the cache, the queries at the end
            S = k.shape[2]
            q = points["hook_rot_q"].heads(self.rope(q, S - q.shape[2]))
            k = points["hook_rot_k"].heads(self.rope(k, 0))
        if self.temperature is not None:
            q = self.temperature(q, k.shape[2] - q.shape[2] if in_cache else start)
        return q, k, v

    def finish(self, z: Tensor, cache: KVCache | None) -> Tensor:
        return z

    def cache_width(self) -> int:
        """Numbers the KV cache keeps per token: 2·H_kv·d."""
        return 2 * self.heads.n_kv_head * self.head_dim

    def new_cache(self, max_lookback: int | None) -> KVCache:
        return KVCache(max_lookback)

    def skipped_points(self) -> set[str]:
        return set() if self.rope is not None else {"hook_rot_q", "hook_rot_k"}

    def per_head_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """W_Q^h (H, D, d), W_K^h and W_V^h (H_kv, D, d): the per-head view of the fused weight."""
        return self.heads.unfuse(self.weight.detach(), self.head_dim)

    @torch.no_grad()
    def load_per_head_weights(self, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> None:
        self.weight.copy_(self.heads.fuse(w_q, w_k, w_v))
