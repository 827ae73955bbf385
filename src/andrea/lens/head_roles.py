"""Head-role metrics (docs/head_roles.md): what each head of each layer attends to, as a number.

Each metric is the mean, over the queries where it is defined, of a per-query score in [0, 1],
for every (layer, head), from the attention weights A (B, H, T, T) the model returns. A query is
defined only where the role can be told apart from the others on that input; a metric with no
defined query is not applicable (NaN here, "n/a" wherever it is shown), never a number.

- entropy: -sum_j A[t, j] log A[t, j] / log(t + 1); 0 = one key, 1 = uniform over the causal
  prefix. Defined for t >= 1 (query 0 has one key).
- lookback_k: A[t, t - k]; defined where ids[t - k] != ids[t] (else a head reading its own token
  could not be told from one reading k back). previous_token is lookback_1.
- first_token: A[t, 0], the attention sink; defined for t >= 2 (at t = 1 key 0 is the previous token).
- induction: the mass on keys k that follow an earlier occurrence of the query's token
  (ids[k - 1] == ids[t]) and that no other role explains: not the query itself or its previous
  token (k <= t - 2), not a copy of the query's token (ids[k] != ids[t]).

Weights whose rows do not sum to 1 (sigmoid, sink and differential attention: the mechanism's
rows_sum_to_one) are scored as shares: each row divided by its total absolute weight (`shares`), so a
score is the part of what the head reads that follows the role, and stays in [0, 1].
first_token_mass reads the raw weights instead, the sink question (shares only for a mixer's implied weights
on no fixed scale).

Weights from any backend give the same numbers (the block returns the same weights for all of
them), so the metrics compare backends too. TransformerLens's figures: andrea.lens.transformer_lens.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric


class HeadScore(Metric):
    """Mean of a per-query score over defined queries, per (layer, head): compute() -> (L, H), NaN if none."""

    full_state_update = False
    higher_is_better: bool | None = None
    total: Tensor  # (L, H) state: sum of the scores of defined queries
    count: Tensor  # (L, H) state: number of defined queries

    def __init__(self, n_layer: int, n_head: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", torch.zeros(n_layer, n_head, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.zeros(n_layer, n_head, dtype=torch.float64), dist_reduce_fx="sum")

    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        """weights (B, H, T, T), input_ids (B, T) -> scores (B, H, T) and defined (B, H, T) or (B, T) bool."""
        raise NotImplementedError

    def update(self, weights: list[Tensor], input_ids: Tensor) -> None:
        """weights: one (B, H, T, T) tensor per layer; input_ids (B, T)."""
        for layer, w in enumerate(weights):
            if w.shape[-1] != w.shape[-2] or w.shape[-1] != input_ids.shape[-1]:
                raise ValueError(
                    f"head-role metrics need square (B, H, T, T) weights over the T input ids, got {tuple(w.shape)}"
                )
            scores, defined = self.query_scores(w.detach().double(), input_ids.to(w.device))
            defined = (defined if defined.dim() == 3 else defined.unsqueeze(1)).expand_as(scores)  # (B, H, T)
            self.total[layer] += (scores * defined).sum(dim=(0, 2))
            self.count[layer] += defined.sum(dim=(0, 2))

    def compute(self) -> Tensor:
        return torch.where(self.count > 0, self.total / self.count.clamp(min=1), torch.nan).float()

    def queries(self) -> Tensor:
        """(L, H) number of defined queries each score rests on."""
        return self.count.long()


def shares(weights: Tensor) -> Tensor:
    """(..., T, S) weights -> each row over its total absolute weight: |A[t, j]| / sum_j |A[t, j]| (a row of
    zeros stays zeros)."""
    magnitude = weights.abs()
    return magnitude / magnitude.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(weights.dtype).tiny)


def first_token_mass(weights: list[Tensor], as_shares: list[bool] | None = None) -> list[float]:
    """The raw weight on key 0 (the attention sink), per layer: the mean over heads, rows and queries
    t >= 2 of A[t, 0] (negative where a differential head subtracts it), whatever the rows sum to; in the
    layers `as_shares` marks (implied weights on no fixed scale: WeightStyle.first_token_as_share), of
    |A[t, 0]| as a share of the row's absolute total."""
    as_shares = as_shares or [False] * len(weights)
    return [
        float((shares(w.double()) if share else w)[..., 2:, 0].double().mean()) if w.shape[-2] > 2 else math.nan
        for w, share in zip(weights, as_shares, strict=True)
    ]


def _positions(T: int, device: torch.device) -> Tensor:
    return torch.arange(T, device=device)


class AttentionEntropy(HeadScore):
    higher_is_better = False

    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        T = weights.shape[-1]
        entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (B, H, T); 0 log 0 = 0
        t = _positions(T, weights.device).double()
        normalised = entropy / torch.log(t + 1).clamp(min=1e-12)  # 1 = uniform over keys 0..t
        return normalised, (t >= 1) & (weights.sum(dim=-1) > 0)  # rows with more than one key, not masked out


class LookbackScore(HeadScore):
    """lookback_k: the mass on the key k positions back."""

    def __init__(self, n_layer: int, n_head: int, k: int = 1, **kwargs: Any) -> None:
        super().__init__(n_layer, n_head, **kwargs)
        self.k = k

    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        B, H, T, _ = weights.shape
        k = self.k
        scores = torch.zeros(B, H, T, dtype=weights.dtype, device=weights.device)
        defined = torch.zeros(B, T, dtype=torch.bool, device=weights.device)
        if k < T:
            scores[..., k:] = weights.diagonal(offset=-k, dim1=-2, dim2=-1)  # A[t, t - k] for t >= k
            defined[:, k:] = input_ids[:, :-k] != input_ids[:, k:]
        return scores, defined


class PreviousTokenScore(LookbackScore):
    def __init__(self, n_layer: int, n_head: int, **kwargs: Any) -> None:
        super().__init__(n_layer, n_head, k=1, **kwargs)


class FirstTokenScore(HeadScore):
    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        B, _, T, _ = weights.shape
        return weights[..., 0], (_positions(T, weights.device) >= 2).expand(B, T)


class InductionScore(HeadScore):
    def query_scores(self, weights: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        T = input_ids.shape[-1]
        t, k = _positions(T, input_ids.device).view(T, 1), _positions(T, input_ids.device).view(1, T)
        follows = torch.zeros_like(input_ids.unsqueeze(2).expand(-1, -1, T), dtype=torch.bool)  # (B, T, T)
        follows[..., 1:] = input_ids.unsqueeze(2) == input_ids[:, :-1].unsqueeze(1)  # ids[k - 1] == ids[t]
        copy = input_ids.unsqueeze(2) == input_ids.unsqueeze(1)  # ids[k] == ids[t]
        keys = follows & ~copy & (k <= t - 2)  # (B, T, T): the keys only an induction head explains
        scores = (weights * keys.unsqueeze(1)).sum(dim=-1)  # (B, H, T)
        return scores, keys.any(dim=-1)


HEAD_ROLES: dict[str, type[HeadScore]] = {
    "entropy": AttentionEntropy,
    "previous_token": PreviousTokenScore,
    "first_token": FirstTokenScore,
    "induction": InductionScore,
}


def role_metric(role: str, n_layer: int, n_head: int, **kwargs: Any) -> HeadScore:
    """The metric of a role by name: one of HEAD_ROLES, or lookback_<k> for any k >= 1."""
    if role in HEAD_ROLES:
        return HEAD_ROLES[role](n_layer, n_head, **kwargs)
    prefix, _, k = role.partition("_")
    if prefix == "lookback" and k.isdigit() and int(k) >= 1:
        return LookbackScore(n_layer, n_head, k=int(k), **kwargs)
    raise ValueError(f"{role!r} is not a head role: use one of {', '.join(HEAD_ROLES)} or lookback_<k>")
