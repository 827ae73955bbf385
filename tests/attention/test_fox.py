"""Forgetting attention (andrea.attention.mechanisms.fox) in a block is fla-core 0.6.0's `naive_forgetting_attn`
(BTHD; g the log forget gate per head; fp32 out) with the block's own projections and gate, on every backend that
runs it; a backend whose values must match its keys, or grouped heads, are refused in one line."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from andrea.attention import MultiHeadSelfAttention, UnsupportedAttentionError
from tests.fla_naive import fla_naive

D, H, T = 32, 4, 11


@pytest.mark.parametrize("position", ["none", "rope"])
@pytest.mark.parametrize("backend", ["naive", "eager", "sdpa"])
def test_the_block_is_fla_s_forgetting_attention(backend, position):
    torch.manual_seed(0)
    block = MultiHeadSelfAttention(D, H, backend=backend, mechanism="fox", max_context=16, position=position).double()
    x = torch.randn(2, T, D, dtype=torch.float64)
    seen: dict[str, torch.Tensor] = {}

    def keep(z: torch.Tensor, point: Any) -> None:
        seen[point.name.split(".")[-1]] = z

    points = block.hook_points()
    for name in ("hook_rot_q", "hook_rot_k", "hook_q", "hook_k", "hook_v"):
        if name in points:
            points[name].add(keep)
    with torch.no_grad():
        y, _ = block(x)
        q = seen.get("hook_rot_q", seen["hook_q"])  # (B, T, H, d) as the scores read them
        k = seen.get("hook_rot_k", seen["hook_k"])
        fox: Any = block.mechanism
        g = fox.log_forget(x).transpose(1, 2)  # (B, T, H)
        o = fla_naive("forgetting_attn").naive_forgetting_attn(q, k, seen["hook_v"], g)  # fp32
    torch.testing.assert_close(y, block.proj(o.double().reshape(2, T, D)), rtol=1e-5, atol=1e-5)


def test_a_backend_whose_values_must_match_its_keys_is_refused():
    with pytest.raises(
        UnsupportedAttentionError,
        match=r"attention backend 'flex' needs values of the keys' size, and mechanism=fox carries 1 more channel",
    ):
        MultiHeadSelfAttention(D, H, backend="flex", mechanism="fox", max_context=16)


def test_grouped_heads_are_refused():
    with pytest.raises(ValueError, match=r"mechanism=fox keeps one gate per head in its keys.*use heads=mha"):
        MultiHeadSelfAttention(D, H, 2, backend="eager", mechanism="fox", max_context=16)
