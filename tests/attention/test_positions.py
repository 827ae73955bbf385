"""RoPE and ALiBi: the math each one promises, and the capability gate for a score bias."""

import math

import pytest
import torch

from andrea.attention import (
    AttentionBackend,
    Capabilities,
    Causal,
    MultiHeadSelfAttention,
    UnsupportedAttentionError,
    get_backend,
)
from andrea.attention.positions import ALiBi, Rotary, alibi_slopes


def test_alibi_slopes_follow_the_paper():
    assert alibi_slopes(8) == [2**-i for i in range(1, 9)]  # 1/2 .. 1/256
    twelve = alibi_slopes(12)  # not a power of two: 8 from n=8, then every other one of n=16
    assert twelve[:8] == alibi_slopes(8) and twelve[8:] == alibi_slopes(16)[0::2][:4]
    assert len(set(twelve)) == 12


def test_alibi_is_the_written_formula():
    """naive + ALiBi against softmax(q kᵀ/sqrt(d) - m_h·|i - j|, causal) v written out."""
    torch.manual_seed(0)
    B, H, T, d = 2, 4, 7, 8
    q, k, v = torch.randn(B, H, T, d), torch.randn(B, H, T, d), torch.randn(B, H, T, d)
    out, weights = get_backend("naive")(q, k, v, Causal(), need_weights=True, score_mod=ALiBi(H))
    i, j = torch.arange(T).view(-1, 1), torch.arange(T).view(1, -1)
    slopes = torch.tensor(alibi_slopes(H)).view(1, H, 1, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d) - slopes * (i - j).abs()
    expected = scores.masked_fill(j > i, float("-inf")).softmax(-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)


def test_alibi_weights_come_from_the_probe_too():
    q, k, v = (torch.randn(1, 4, 6, 8) for _ in range(3))
    _, expected = get_backend("naive")(q, k, v, Causal(), need_weights=True, score_mod=ALiBi(4))
    _, probed = get_backend("sdpa")(q, k, v, Causal(), need_weights=True, score_mod=ALiBi(4))
    torch.testing.assert_close(probed, expected)


class NoBiasBackend(AttentionBackend):
    name = "no_bias"
    capabilities = Capabilities(score_mod=False)

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None):  # type: ignore[override]  # as plugins written before mechanism and **kwargs: it keeps working
        return get_backend("sdpa").forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights)


def test_a_backend_without_score_bias_refuses_alibi_before_any_work():
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    NoBiasBackend()(q, k, v, Causal())  # without a bias it runs
    with pytest.raises(
        UnsupportedAttentionError,
        match="cannot add a score bias .alibi.; use attention backend (\\w+ / )*eager / .*naive / .*sdpa",
    ):
        NoBiasBackend()(q, k, v, Causal(), score_mod=ALiBi(2))
    with pytest.raises(UnsupportedAttentionError, match="position=rope / learned"):
        MultiHeadSelfAttention(16, 2, backend=NoBiasBackend(), position="alibi")


def test_rope_scores_depend_on_the_distance_only():
    torch.manual_seed(0)
    rope, d = Rotary(16), 16
    q, k = torch.randn(1, 1, 1, d), torch.randn(1, 1, 1, d)
    score = lambda i, j: (rope(q, start=i) * rope(k, start=j)).sum()  # noqa: E731
    torch.testing.assert_close(score(3, 1), score(10, 8))
    torch.testing.assert_close(score(0, 0), (q * k).sum())  # position 0: no rotation
    assert not torch.allclose(score(3, 1), score(3, 2))
    torch.testing.assert_close(rope(q, start=5).norm(), q.norm())  # a rotation keeps the norm


def test_rope_positions_continue_from_start():
    x = torch.randn(2, 3, 10, 8)
    torch.testing.assert_close(Rotary(8)(x)[:, :, 6:], Rotary(8)(x[:, :, 6:], start=6))


def test_rope_needs_an_even_head_dim():
    with pytest.raises(ValueError, match="position.kind=rope needs an even head_dim, got 5"):
        MultiHeadSelfAttention(15, 3, position="rope")
