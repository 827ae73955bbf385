"""einsum: attention written as two einsums, the way a paper writes it.

scores  = einsum("bhtd,bhsd->bhts", q, k) · scale        (B, H, T, S)
weights = softmax over keys, masked                      (B, H, T, S)
out     = einsum("bhts,bhsd->bhtd", weights, v)          (B, H, T, d)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.attention import AttentionBackend, Capabilities, Mask, masked_softmax
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ScoreMod


class EinsumBackend(AttentionBackend):
    name = "einsum"
    # k and v arrive expanded to every query head (native_gqa=False); no score bias (ALiBi) taken
    capabilities = Capabilities(native_weights=True, cpu_backward=True, native_gqa=False, score_mod=False)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,  # always None: the capabilities declare no score bias
        mechanism: Mechanism | None = None,  # always None: it runs softmax only
        **kwargs: Any,  # what later versions of the contract pass; nothing it reads
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, _ = q.shape
        S = k.shape[2]
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) * scale  # (B, H, T, S)
        if mask is None or mask.is_full:
            weights = scores.softmax(dim=-1)
        else:
            allowed = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device)  # (B|1, H|1, T, S)
            weights = masked_softmax(scores, allowed, mask.attends_self)
        out = torch.einsum("bhts,bhsd->bhtd", weights, v)  # (B, H, T, d)
        return out, weights if need_weights else None
