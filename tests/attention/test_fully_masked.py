"""A query whose keys are all masked outputs zeros on every backend, never NaN."""

import pytest
import torch

from andrea.attention import Causal, Document, KeyPadding, MultiHeadSelfAttention, get_backend

from .helpers import BACKENDS, make_qkv


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_empty_rows_are_zero(backend_name):
    backend = get_backend(backend_name)
    q, k, v = make_qkv("gqa", requires_grad=backend.capabilities.cpu_backward)
    # Sequence 1 has no real token, so every one of its rows is empty; composed with & and |.
    mask = KeyPadding(torch.tensor([9, 0])) & (Causal() | Document(torch.tensor([[5] * 9, [0] * 9])))
    out, weights = backend(q, k, v, mask, need_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[1] == 0).all() and (weights[1] == 0).all()
    assert out[0].abs().sum() > 0
    if backend.capabilities.cpu_backward:
        out.square().sum().backward()
        for t in (q, k, v):
            assert torch.isfinite(t.grad).all()
        assert (q.grad[1] == 0).all()  # an empty row passes no gradient back


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_block_with_padding(backend_name):
    """Per-batch padding passed at call time combines with the block's causal mask."""
    block = MultiHeadSelfAttention(16, 4, 2, backend=backend_name, max_context=8)
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        y, weights = block(x, mask=KeyPadding(torch.tensor([5, 8])), return_weights=True)
        trimmed = block(x[:1, :5])
    assert (weights[0, :, :, 5:] == 0).all()
    torch.testing.assert_close(y[0, :5], trimmed[0], atol=1e-5, rtol=1e-4)  # padding changes nothing real
