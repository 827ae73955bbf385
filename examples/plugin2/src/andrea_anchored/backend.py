"""baddbmm: the mask as an additive bias, one fused multiply-add per batch of heads (as many
hand-written implementations do it).

scores  = baddbmm(bias, q, kᵀ, alpha=scale)      bias: 0 where allowed, the dtype's lowest value elsewhere
weights = softmax(scores), rows with no key zeroed
out     = weights @ v
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.attention import AttentionBackend, Capabilities, Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ScoreMod


class BaddbmmBackend(AttentionBackend):
    name = "baddbmm"
    # k and v arrive expanded to every query head; ALiBi is added to the bias like the mask
    capabilities = Capabilities(native_weights=True, cpu_backward=True, native_gqa=False, score_mod=True)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,
        mechanism: Mechanism | None = None,  # always None: it runs softmax only
        **kwargs: Any,  # what later versions of the contract pass; nothing it reads
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, d = q.shape
        S = k.shape[2]
        bias = torch.zeros(B, H, T, S, dtype=q.dtype, device=q.device)  # (B, H, T, S)
        allowed = None
        if mask is not None and not mask.is_full:
            allowed = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device).expand(B, H, T, S)
            bias = bias.masked_fill(~allowed, torch.finfo(q.dtype).min)
        if score_mod is not None:
            bias = bias + score_mod.dense(T, S, num_heads=H, device=q.device, dtype=q.dtype)
        scores = torch.baddbmm(
            bias.reshape(B * H, T, S), q.reshape(B * H, T, d), k.reshape(B * H, S, d).transpose(1, 2), alpha=scale
        )  # (B·H, T, S)
        weights = scores.softmax(dim=-1).view(B, H, T, S)
        if allowed is not None:
            weights = weights * allowed.any(dim=-1, keepdim=True)  # a row with no key gives zeros
        out = weights @ v  # (B, H, T, d)
        return out, weights if need_weights else None
