"""What the conformance kit compares every backend with: the mechanism's formula (andrea.attention.mechanisms.base,
`Mechanism.formula`; softmax's without one) in float64, and what the mechanism declares of its weights."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.softmax import SOFTMAX
from andrea.attention.positions import ScoreMod


def formula_attention(
    cell: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Mask | None,
    score_mod: ScoreMod | None = None,
    mechanism: Mechanism | None = None,
) -> tuple[Tensor, Tensor]:
    """The mechanism's formula (softmax's without one) in float64, at the contract's default scale 1/sqrt(d):
    q (B, H, T, d), k and v (B, H_kv, S, d) -> out (B, H, T, d), weights (B, H, T, S), the weights checked
    against what the mechanism declares of them."""
    mechanism = mechanism or SOFTMAX
    B, H, T, d = q.shape
    S, group = k.shape[2], H // k.shape[1]
    q, k, v = q.double(), k.double().repeat_interleave(group, dim=1), v.double().repeat_interleave(group, dim=1)
    allowed = (
        torch.ones(1, 1, T, S, dtype=torch.bool, device=q.device)
        if mask is None
        else mask.dense(T, S, batch_size=B, num_heads=H, device=q.device)
    )
    allowed = allowed.expand(B, H, T, S)
    bias = None if score_mod is None else score_mod.dense(T, S, num_heads=H, device=q.device, dtype=torch.float64)
    try:
        weights = mechanism.formula(q, k, allowed, 1.0 / d**0.5, bias)
    except NotImplementedError as missing:
        raise AssertionError(f"{cell}: {missing}") from None
    declared_weights(mechanism, weights.detach(), allowed, cell)
    return weights @ v, weights


def declared_weights(mechanism: Mechanism, weights: Tensor, allowed: Tensor, cell: str) -> None:
    """What the mechanism declares of its weights (B, H, T, S) holds: 0 at every masked key, none negative
    unless it is `signed`, and each row that sees a key summing to 1 where `rows_sum_to_one`."""
    hidden = weights.masked_select(~allowed)
    assert not hidden.any(), f"{cell}: {mechanism.name} weighs a masked key ({float(hidden.abs().max()):.3g})"
    if not mechanism.signed:
        assert (weights >= 0).all(), f"{cell}: {mechanism.name} gives a negative weight but does not declare signed"
    if mechanism.rows_sum_to_one:
        sums = weights.sum(dim=-1).masked_select(allowed.any(dim=-1))
        off = float((sums - 1).abs().max()) if sums.numel() else 0.0
        assert off < 1e-4, f"{cell}: {mechanism.name} declares rows_sum_to_one, but a row is off by {off:.3g}"
