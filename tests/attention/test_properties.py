"""The lesson's five properties (docs/spec.md §7), for every backend, through the whole block."""

import pytest
import torch

from andrea.attention import MultiHeadSelfAttention, UnsupportedAttentionError, get_backend

from .helpers import BACKENDS, HEADS

D_MODEL, SEQ = 32, 10


def make_block(backend, heads="gqa", mask="causal"):
    n_head, n_kv_head = HEADS[heads]
    return MultiHeadSelfAttention(D_MODEL, n_head, n_kv_head, backend=backend, mask=mask, max_context=16)


def trains_on_cpu(backend):
    return get_backend(backend).capabilities.cpu_backward


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_contract(backend, heads):
    block = make_block(backend, heads)
    x = torch.randn(3, SEQ, D_MODEL)
    with torch.no_grad():
        y, weights = block(x, return_weights=True)
    assert y.shape == (3, SEQ, D_MODEL)
    assert weights.shape == (3, HEADS[heads][0], SEQ, SEQ)


@pytest.mark.parametrize("backend", BACKENDS)
def test_causality(backend):
    """Changing a future token never changes an earlier output."""
    block = make_block(backend)
    x = torch.randn(2, SEQ, D_MODEL)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, SEQ - 6, D_MODEL) * 10
    with torch.no_grad():
        (before, _), (after, _) = block(x), block(changed)
    torch.testing.assert_close(before[:, :6], after[:, :6], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, 6:], after[:, 6:])  # the change did reach the later positions


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_rows(backend):
    """Weights are >= 0, each row sums to 1, and row i has mass only on keys 0..i."""
    block = make_block(backend, "mha")
    with torch.no_grad():
        _, weights = block(torch.randn(2, SEQ, D_MODEL) * 3, return_weights=True)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=0)
    assert (weights.triu(diagonal=1) == 0).all()
    assert torch.allclose(weights[..., 0, 0], torch.ones(()))  # row 0 attends only to itself


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_head_split(backend, heads):
    """The fused block equals the per-head computation of docs/spec.md §1 written out by hand."""
    block = make_block(backend, heads)
    w_q, w_k, w_v = block.per_head_weights()  # (H, D, d), (H_kv, D, d) x2
    n_head, n_kv_head = HEADS[heads]
    x = torch.randn(2, SEQ, D_MODEL)
    d = D_MODEL // n_head
    causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
    head_outputs = []
    for h in range(n_head):
        kv = h // (n_head // n_kv_head)
        q_h, k_h, v_h = x @ w_q[h], x @ w_k[kv], x @ w_v[kv]  # (B, T, d)
        scores = (q_h @ k_h.transpose(-2, -1) / d**0.5).masked_fill(~causal, float("-inf"))
        head_outputs.append(scores.softmax(-1) @ v_h)
    expected = torch.cat(head_outputs, dim=-1) @ block.proj.weight.T  # concat heads, then W_O
    with torch.no_grad():
        torch.testing.assert_close(block(x)[0], expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_flow(backend):
    """Every parameter gets a non-zero gradient; a backend without CPU backward refuses to train."""
    block = make_block(backend, mask="causal & sliding_window(window=4)")
    x = torch.randn(2, SEQ, D_MODEL, requires_grad=True)
    if not trains_on_cpu(backend):
        with pytest.raises(UnsupportedAttentionError, match=f"'{backend}' has no backward on CPU"):
            block(x)
        return
    block(x)[0].square().mean().backward()
    for name, param in [*block.named_parameters(), ("input", x)]:
        assert param.grad is not None and param.grad.abs().sum() > 0, f"{name} got no gradient"
