"""sdpa: torch's fused `scaled_dot_product_attention` (flash / memory-efficient kernels).

The mask reaches it in the cheapest form it accepts: nothing for an unmasked
call, `is_causal=True` when the mask is exactly causal over a square score
matrix (torch aligns `is_causal` top-left, wrong for T != S), nothing again for
a causal decode step (one query sees every key), an explicit boolean mask
otherwise. A score bias (ALiBi) goes in as a float mask with the masked keys at
the dtype's lowest value. Grouped heads go in as they are (`enable_gqa`).
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.attention.contract import AttentionBackend, Capabilities
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ScoreMod


class SDPABackend(AttentionBackend):
    name = "sdpa"
    capabilities = Capabilities(
        native_weights=False, cpu_backward=True, native_gqa=True, score_mod=True, distinct_value_dim=True
    )

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
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, _ = q.shape
        S = k.shape[2]
        allowed, is_causal = _allowed(q, S, mask, score_mod)
        attn_mask = allowed
        if score_mod is not None:
            attn_mask = score_mod.dense(T, S, num_heads=H, device=q.device, dtype=q.dtype)  # (1, H, T, S)
            if allowed is not None:
                attn_mask = attn_mask.masked_fill(~allowed, torch.finfo(q.dtype).min)  # (B|1, H, T, S)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=k.shape[1] != H
        )  # (B, H, T, d)
        if allowed is not None and mask is not None and not mask.attends_self:  # allowed: only from a mask
            # Not every kernel on every device returns zeros for a row with no key.
            out = torch.where(allowed.any(dim=-1, keepdim=True), out, 0.0)
        return out, None


def _allowed(q: Tensor, S: int, mask: Mask | None, score_mod: ScoreMod | None) -> tuple[Tensor | None, bool]:
    """The mask as SDPA takes it: (B|1, H|1, T, S) booleans, or None with is_causal for its own causal path (no
    mask at all where every key is seen: no mask, a full one, causal with one query)."""
    B, H, T, _ = q.shape
    if mask is None or mask.is_full or (mask.is_causal and T == 1):
        return None, False
    if mask.is_causal and T == S and score_mod is None:
        return None, True
    return mask.dense(T, S, batch_size=B, num_heads=H, device=q.device), False
