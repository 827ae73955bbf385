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
    assert weights is not None
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[1] == 0).all() and (weights[1] == 0).all()
    assert out[0].abs().sum() > 0
    if backend.capabilities.cpu_backward:
        out.square().sum().backward()
        for t in (q, k, v):
            assert t.grad is not None and torch.isfinite(t.grad).all()
        assert q.grad is not None and (q.grad[1] == 0).all()  # an empty row passes no gradient back


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_block_with_padding(backend_name):
    """Per-batch padding passed at call time combines with the block's causal mask."""
    block = MultiHeadSelfAttention(16, 4, 2, backend=backend_name, max_context=8)
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        y, weights = block(x, mask=KeyPadding(torch.tensor([5, 8])), return_weights=True)
        trimmed, _ = block(x[:1, :5])
    assert (weights[0, :, :, 5:] == 0).all()
    torch.testing.assert_close(y[0, :5], trimmed[0], atol=1e-5, rtol=1e-4)  # padding changes nothing real


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize(
    "backend_name",
    [pytest.param(name, marks=pytest.mark.slow) if name == "flex" else name for name in BACKENDS],  # flex: ~10 s
)
def test_huge_scores_stay_finite_under_every_mask(backend_name, dtype):
    """Scores near the dtype's range (q, k scaled up) and ALiBi on top: softmax subtracts the row
    maximum, masked keys take the lowest finite value, so no NaN or Inf comes out, empty rows included."""
    from andrea.attention.positions import ALiBi

    from .helpers import make_masks

    backend = get_backend(backend_name)
    for name, mask in make_masks().items():
        q, k, v = (t * 300 for t in make_qkv("gqa", dtype))  # |q·k| / sqrt(d) up to ~1e5
        for score_mod in (None, ALiBi(4)):
            with torch.no_grad():
                out, _ = backend(q, k, v, mask, score_mod=score_mod)
            assert torch.isfinite(out).all(), f"{name}, {score_mod}"
