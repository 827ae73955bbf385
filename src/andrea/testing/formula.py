"""What the conformance kit compares every backend with: the mechanism's formula (andrea.attention.mechanisms.base,
`Mechanism.formula`; softmax's without one) in float64, and what the mechanism declares of its weights."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.softmax import SOFTMAX
from andrea.attention.positions import ScoreMod

TOLERANCE = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}  # (atol, rtol)


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


def assert_close(got: Tensor, want: Tensor, dtype: torch.dtype, what: str, atol: float = 0.0) -> None:
    """got == want within the dtype's tolerance (its absolute part raised to `atol` where that is larger), or an
    AssertionError whose message starts with `what`."""
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(
        got, want, atol=max(tolerance["atol"], atol), rtol=tolerance["rtol"], msg=lambda detail: f"{what}\n{detail}"
    )


def gradients_agree(
    cell: str,
    out: Tensor,
    expected: Tensor,
    qkv: tuple[Tensor, ...],
    ref: list[Tensor],
    mechanism: Mechanism | None,
) -> None:
    """The backend's gradients (of q, k, v and the mechanism's parameters) against the formula's, in float64."""
    named = dict(mechanism.named_parameters()) if mechanism is not None else {}
    grad_out = torch.randn(expected.shape, dtype=torch.float64, device=expected.device)
    expected.backward(grad_out)
    wanted = {name: _grad(p).clone() for name, p in named.items()}
    for p in named.values():
        p.grad = None
    out.backward(grad_out.to(out.dtype))
    for name, got, want in zip("qkv", qkv, ref, strict=True):
        assert got.grad is not None and want.grad is not None, f"{cell}: no gradient for {name}"
        assert torch.isfinite(got.grad).all(), f"{cell}: d{name} not finite"
        assert_close(got.grad.double(), want.grad, out.dtype, f"{cell}: d{name} differs from the formula's")
    for name, p in named.items():
        assert_close(
            _grad(p).float(), wanted[name].float(), out.dtype, f"{cell}: the gradient of mechanism.{name} differs"
        )


def _grad(p: Tensor) -> Tensor:
    return p.grad if p.grad is not None else torch.zeros_like(p)
