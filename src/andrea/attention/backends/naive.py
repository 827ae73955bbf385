"""naive: the math as the lesson writes it, one head at a time.

For every head h: scores = Q_h K_hᵀ · scale (+ a position bias such as ALiBi),
mask, softmax row-wise, times V_h.
Slow on purpose; every other backend is tested against this one.
"""

import torch
from torch import Tensor

from andrea.attention.contract import AttentionBackend, Capabilities, masked_softmax
from andrea.attention.masks import Mask
from andrea.attention.positions import ScoreMod


class NaiveBackend(AttentionBackend):
    name = "naive"
    capabilities = Capabilities(native_weights=True, cpu_backward=True, native_gqa=True, score_mod=True)

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
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, _ = q.shape
        H_kv, S = k.shape[1], k.shape[2]
        group = H // H_kv  # query heads sharing one key/value head (1 for MHA)
        allowed, attends_self = None, mask is None or mask.attends_self
        if mask is not None and not mask.is_full:
            allowed = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device).expand(B, H, T, S)
        bias = None if score_mod is None else score_mod.dense(T, S, num_heads=H, device=q.device, dtype=q.dtype)
        outputs, weights = [], []
        for h in range(H):
            q_h = q[:, h]  # (B, T, d)
            k_h = k[:, h // group]  # (B, S, d)
            v_h = v[:, h // group]  # (B, S, d)
            scores = q_h @ k_h.transpose(-2, -1) * scale  # (B, T, S): how well query i matches key j
            if bias is not None:
                scores = scores + bias[:, h]  # (1, T, S): e.g. ALiBi's -m_h·|i - j|
            a = masked_softmax(
                scores, None if allowed is None else allowed[:, h], attends_self, inplace=True
            )  # (B, T, S)
            outputs.append(a @ v_h)  # (B, T, d): output[i] = sum_j a[i, j] v[j]
            weights.append(a)
        out = torch.stack(outputs, dim=1)  # (B, H, T, d)
        return out, torch.stack(weights, dim=1) if need_weights else None
