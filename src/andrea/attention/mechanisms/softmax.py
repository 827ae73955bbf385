"""softmax: scaled dot-product attention (Vaswani et al., 2017, "Attention Is All You Need").

A = softmax(Q Kᵀ / sqrt(d) + bias, masked keys at -inf)     each row sums to 1
out = A V
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.attention.mechanisms.base import Mechanism, dense_allowed, dense_scores, scores_of, softmax_of
from andrea.attention.positions import ScoreMod


def masked_softmax(scores: Tensor, allowed: Tensor | None, attends_self: bool = False, inplace: bool = False) -> Tensor:
    """Softmax over keys (last dim) where `allowed` is True.

    A row with no allowed key becomes all zeros instead of NaN: masked scores
    are filled with the dtype's lowest finite value (so the softmax stays
    finite, forward and backward) and empty rows are then zeroed, a step
    skipped when the mask guarantees every query sees itself. `inplace=True`
    overwrites `scores` (one score-sized tensor less), for callers that own it.
    """
    if allowed is None:
        return scores.softmax(dim=-1)
    fill = scores.masked_fill_ if inplace else scores.masked_fill
    weights = fill(~allowed, torch.finfo(scores.dtype).min).softmax(dim=-1)
    return weights if attends_self else weights * allowed.any(dim=-1, keepdim=True)


def attention_weights(
    q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None = None
) -> Tensor:
    """softmax(mask(q kᵀ · scale + bias)) for all heads at once: (B, H, T, S).

    Grouped heads are handled by viewing the H query heads as (H_kv, group)
    rather than copying k (mechanisms.base.dense_scores). This is the materialised math
    of the `eager` backend, and the probe that gives weights for backends that never form them.
    """
    scores = dense_scores(q, k, scale, score_mod)  # (B, H, T, S)
    B, H, T, S = scores.shape
    allowed = dense_allowed(mask, B, H, T, S, device=q.device)  # (B|1, H|1, T, S), None: nothing masked
    return masked_softmax(scores, allowed, mask is None or mask.attends_self, inplace=True)  # scores is ours


class Softmax(Mechanism):
    name = "softmax"

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        return masked_softmax(scores, allowed, attends_self, inplace=True)  # the scores are the caller's own

    def weights(self, q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None) -> Tensor:
        return attention_weights(q, k, mask, scale, score_mod)  # what eager and the probe have always computed

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        return softmax_of(scores_of(q, k, scale, bias), allowed)


# softmax has no parameters: one instance serves every call that names no mechanism
SOFTMAX = Softmax(n_head=1, head_dim=1, d_model=1, max_context=1)
