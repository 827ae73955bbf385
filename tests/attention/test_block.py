"""MultiHeadSelfAttention: its errors, its mask buffer, weights for every backend, T < S."""

import pytest
import torch

from andrea.attention import (
    Causal,
    MultiHeadSelfAttention,
    PrefixLM,
    SlidingWindow,
    UnsupportedAttentionError,
    get_backend,
)
from andrea.attention.heads import FusedQKV

from .helpers import BACKENDS, make_qkv


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=30, n_head=4), "d_model=30 is not divisible by heads.n_head=4"),
        (dict(d_model=32, n_head=8, n_kv_head=3), "heads.n_kv_head=3 does not divide heads.n_head=8"),
        (dict(d_model=0, n_head=1), "d_model=0 must be a positive integer"),
        (dict(d_model=32, n_head=4, max_context=0), "max_context=0 must be a positive integer"),
        (dict(d_model=32, n_head=4, mask="causal & window"), "unknown mask strategy 'window'"),
        (dict(d_model=32, n_head=4, mask="sliding_window(window=0)"), "mask.window=0"),
    ],
)
def test_bad_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadSelfAttention(**kwargs)


def test_bad_inputs():
    block = MultiHeadSelfAttention(32, 4, max_context=8)
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_context=8"):
        block(torch.randn(1, 9, 32))
    with pytest.raises(ValueError, match="input has d_model=16, the block was built for 32"):
        block(torch.randn(1, 4, 16))


def test_backend_refuses_before_any_tensor_work():
    block = MultiHeadSelfAttention(32, 4, backend="flex")
    calls = []
    _fused(block).register_forward_hook(lambda *args: calls.append(1))
    with pytest.raises(UnsupportedAttentionError, match="no backward on CPU"):
        block(torch.randn(1, 4, 32))  # parameters require grad: this is training
    assert calls == []
    with torch.no_grad():
        block(torch.randn(1, 4, 32))  # inference with Flex on CPU is fine
    assert calls == [1]


def test_mask_buffer():
    block = MultiHeadSelfAttention(32, 4, mask="causal", max_context=12)
    assert block.mask_buffer.shape == (1, 1, 12, 12) and block.mask_buffer.dtype == torch.bool
    assert torch.equal(block.mask_buffer[0, 0], torch.ones(12, 12, dtype=torch.bool).tril())
    assert "mask_buffer" not in block.state_dict()  # derived, never saved
    assert not any(b.requires_grad for b in block.buffers())
    assert block.to(torch.bfloat16).mask_buffer.dtype == torch.bool


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_for_every_backend(backend):
    """Backends that never form weights get them from the probe; all equal naive's."""
    reference = MultiHeadSelfAttention(32, 4, 2, backend="naive", mask="sliding_window(window=3)")
    block = MultiHeadSelfAttention(32, 4, 2, backend=backend, mask="sliding_window(window=3)")
    block.load_state_dict(reference.state_dict())
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        (y, weights), (y_ref, weights_ref) = block(x, return_weights=True), reference(x, return_weights=True)
    assert weights.shape == (2, 4, 7, 7)
    torch.testing.assert_close(weights, weights_ref)
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("mask", [Causal(), SlidingWindow(3), PrefixLM(5)], ids=lambda m: m.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_fewer_queries_than_keys(backend, mask):
    """The last 3 queries over 9 keys (a decode step with a KV cache) equal the last 3 rows
    of the full computation; torch's top-left `is_causal` would get this wrong."""
    q, k, v = make_qkv("gqa")
    with torch.no_grad():
        full, _ = get_backend("naive")(q, k, v, mask)
        tail, _ = get_backend(backend)(q[:, :, -3:], k, v, mask)
    torch.testing.assert_close(tail, full[:, :, -3:], atol=1e-5, rtol=1e-4)


def test_scale_is_used():
    q, k, v = make_qkv("mha")
    for backend in BACKENDS:
        with torch.no_grad():
            default, _ = get_backend(backend)(q, k, v, Causal())
            explicit, _ = get_backend(backend)(q, k, v, Causal(), scale=q.shape[-1] ** -0.5)
            other, _ = get_backend(backend)(q, k, v, Causal(), scale=1.0)
        torch.testing.assert_close(default, explicit)
        assert not torch.allclose(default, other)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 4, 5, 8), (1, 3, 5, 8), (1, 3, 5, 8)), "not a multiple"),
        (((1, 4, 5, 8), (1, 2, 5, 4), (1, 2, 5, 4)), "disagree on batch or head_dim"),
        (((1, 4, 5, 8), (1, 2, 5, 8), (1, 2, 6, 8)), "must have the same shape"),
        (((4, 5, 8), (2, 5, 8), (2, 5, 8)), "attention expects q \\(B, H, T, d\\)"),
        (((1, 4, 6, 8), (1, 2, 5, 8), (1, 2, 5, 8)), "6 queries over 5 keys"),
    ],
)
def test_contract_shape_errors(shapes, message):
    q, k, v = (torch.randn(s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        get_backend("eager")(q, k, v, Causal())


def test_no_mask_and_public_softmax_leaves_its_input():
    from andrea.attention import masked_softmax

    block = MultiHeadSelfAttention(16, 2, backend="eager", mask=None, max_context=8)
    assert block.mask.is_full
    scores = torch.randn(2, 3, 3)
    before = scores.clone()
    masked_softmax(scores, torch.ones(3, 3, dtype=torch.bool).tril())
    assert torch.equal(scores, before)


def test_a_typo_d_position_is_refused_not_ignored():
    with pytest.raises(ValueError, match="position='rotary' is not one of learned, rope, alibi, none"):
        MultiHeadSelfAttention(32, 4, position="rotary")


def _fused(block: MultiHeadSelfAttention) -> FusedQKV:
    """The block's fused W_Q, W_K, W_V (every block here has one: none is latent)."""
    assert block.qkv is not None
    return block.qkv
