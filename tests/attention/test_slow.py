"""Slow checks: compiled FlexAttention and a full-size ANDREA-120M layer. Run by CI with -m slow."""

import pytest
import torch

from andrea.attention import Causal, MultiHeadSelfAttention, SlidingWindow, get_backend

from .helpers import make_qkv


@pytest.mark.slow  # reason: torch.compile of FlexAttention takes 15-20 s per mask on CPU
@pytest.mark.parametrize("mask", [Causal(), Causal() & SlidingWindow(3)], ids=lambda m: m.name)
def test_compiled_flex_matches_naive(mask):
    q, k, v = make_qkv("gqa", seq=32, head_dim=16)
    with torch.no_grad():
        expected, _ = get_backend("naive")(q, k, v, mask)
        out, _ = get_backend("flex", compile=True)(q, k, v, mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # reason: a 768-wide block at T=1024 on every backend takes ~20 s on 2 CPU threads
def test_full_size_layer_agrees_across_backends():
    """ANDREA-120M's attention layer (12 heads, d_model 768, context 1024) at full length."""
    reference = MultiHeadSelfAttention(768, 12, backend="naive", max_context=1024)
    x = torch.randn(1, 1024, 768)
    with torch.no_grad():
        expected, _ = reference(x)
        for name in ("eager", "sdpa", "flex"):
            block = MultiHeadSelfAttention(768, 12, backend=name, max_context=1024)
            block.load_state_dict(reference.state_dict())
            torch.testing.assert_close(block(x)[0], expected, atol=1e-4, rtol=1e-3, msg=name)
