"""Head-detector figures as TransformerLens computes them (`detect_head`, error_measure='mul'),
given beside andrea's own (docs/head_roles.md compares the definitions).

TransformerLens scores a head against a 0/1 detection pattern P (T, T) as
sum(A * P) / sum(A) over the whole (T, T) pattern, with BOS and the current token kept, and
averages over the sequences given. Every row of A sums to 1, so this is the mean over all T
rows of each row's mass on P: rows where P is empty count as 0, not as undefined.

    previous_token    P[t, t - 1] = 1
    duplicate_token   P[t, j] = 1 for j < t with ids[j] == ids[t]
    induction         P[t, j + 1] = 1 for j < t with ids[j] == ids[t], j + 1 <= t
"""

from __future__ import annotations

import torch
from torch import Tensor

PATTERNS = ("previous_token", "duplicate_token", "induction")


def detection_pattern(role: str, input_ids: Tensor) -> Tensor:
    """input_ids (B, T) -> TransformerLens's 0/1 detection pattern (B, T, T) for `role`."""
    B, T = input_ids.shape
    if role == "previous_token":
        return torch.ones(T, T, device=input_ids.device).tril(-1).triu(-1).expand(B, T, T)
    duplicate = (input_ids.unsqueeze(2) == input_ids.unsqueeze(1)).float().tril(-1)  # (B, T, T), j < t
    if role == "duplicate_token":
        return duplicate
    if role == "induction":
        shifted = torch.zeros_like(duplicate)
        shifted[..., 1:] = duplicate[..., :-1]  # credit j + 1 for every duplicate j
        return shifted.tril()
    raise ValueError(f"{role!r} is not one of TransformerLens's detection patterns ({', '.join(PATTERNS)})")


def detect(weights: list[Tensor], input_ids: Tensor, role: str) -> Tensor:
    """weights: one (B, H, T, T) per layer -> (L, H) TransformerLens 'mul' scores, mean over the batch."""
    pattern = detection_pattern(role, input_ids).unsqueeze(1).double()  # (B, 1, T, T)
    scores = []
    for w in weights:
        w = w.detach().double()
        scores.append(((w * pattern).sum(dim=(-1, -2)) / w.sum(dim=(-1, -2))).mean(dim=0))  # (H,)
    return torch.stack(scores).float()
