"""Head-role metrics (docs/spec.md §6): what each head of each layer attends to, as a number.

Each metric averages a per-query score over every query where it is defined,
for every (layer, head), from the attention weights the model returns:

- entropy: -sum_j A[t, j] log A[t, j] in nats; 0 = one key, log(t + 1) = uniform.
- previous_token: A[t, t - 1], the mass on the immediately previous token.
- first_token: A[t, 0] for t >= 1, the mass on the start of the sequence.
- induction: sum of A[t, j + 1] over every earlier position j < t holding the
  same token as t: the mass on "what came after this token before".

Weights from any backend give the same numbers (the block returns the same
(B, H, T, S) weights for all of them), so the metrics compare backends too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric


class HeadScore(Metric):
    """Mean of a per-query score over defined queries, per (layer, head): compute() -> (L, H)."""

    full_state_update = False
    higher_is_better: bool | None = None
    total: Tensor  # (L, H) state: sum of the scores
    count: Tensor  # (L, 1) state: number of defined queries

    def __init__(self, n_layer: int, n_head: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", torch.zeros(n_layer, n_head, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.zeros(n_layer, 1, dtype=torch.float64), dist_reduce_fx="sum")

    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        """weights (B, H, T, S), input_ids (B, T) -> scores (B, H, T) and defined (B, T) bool."""
        raise NotImplementedError

    def update(self, weights: list[Tensor], input_ids: Tensor) -> None:
        """weights: one (B, H, T, T) tensor per layer; input_ids (B, T)."""
        for layer, w in enumerate(weights):
            if w.shape[-1] != w.shape[-2] or w.shape[-1] != input_ids.shape[-1]:
                raise ValueError(
                    f"head-role metrics need square (B, H, T, T) weights over the T input ids, got {tuple(w.shape)}"
                )
            scores, defined = self.query_scores(w.detach().double(), input_ids)
            self.total[layer] += (scores * defined.unsqueeze(1)).sum(dim=(0, 2))
            self.count[layer] += defined.sum()

    def compute(self) -> Tensor:
        return (self.total / self.count.clamp(min=1)).float()


class AttentionEntropy(HeadScore):
    higher_is_better = False

    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (B, H, T); 0 log 0 = 0
        return entropy, weights.sum(dim=-1)[:, 0] > 0  # rows with any key


class PreviousTokenScore(HeadScore):
    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        B, H, T, _ = weights.shape
        scores = torch.zeros(B, H, T, dtype=weights.dtype, device=weights.device)
        scores[..., 1:] = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # A[t, t - 1] for t >= 1
        return scores, torch.arange(T, device=weights.device).expand(B, T) >= 1


class FirstTokenScore(HeadScore):
    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        B, H, T, _ = weights.shape
        return weights[..., 0], torch.arange(T, device=weights.device).expand(B, T) >= 1


class InductionScore(HeadScore):
    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        T = input_ids.shape[-1]
        positions = torch.arange(T, device=input_ids.device)
        same = input_ids.unsqueeze(2) == input_ids.unsqueeze(1)  # (B, T, T): token at j equals token at t
        earlier = same & (positions.view(1, T, 1) > positions.view(1, 1, T))  # ... and j < t
        after_earlier = torch.zeros_like(earlier)
        after_earlier[..., 1:] = earlier[..., :-1]  # key j + 1 for every earlier occurrence j
        scores = (weights * after_earlier.unsqueeze(1)).sum(dim=-1)  # (B, H, T)
        return scores, earlier.any(dim=-1)


HEAD_ROLES: dict[str, type[HeadScore]] = {
    "entropy": AttentionEntropy,
    "previous_token": PreviousTokenScore,
    "first_token": FirstTokenScore,
    "induction": InductionScore,
}
