"""Head configurations, the fused QKV layout and its per-head view."""

import pytest
import torch

from andrea.attention import HeadConfig, MultiHeadSelfAttention, gqa, mha, mqa
from andrea.attention.heads import FusedQKV


def test_kinds():
    assert mha(12).kind == "mha" and gqa(12, 4).kind == "gqa" and mqa(12).kind == "mqa"
    assert gqa(12, 4).group_size == 3 and gqa(12, 4).qkv_features(64) == (12 + 8) * 64


@pytest.mark.parametrize(
    "n_head, n_kv_head, message",
    [
        (8, 3, r"heads.n_kv_head=3 does not divide heads.n_head=8; choose one of \[1, 2, 4, 8\]"),
        (0, 1, "heads.n_head=0 must be a positive integer"),
        (4, -1, "heads.n_kv_head=-1 must be a positive integer"),
        (4, 8, "heads.n_kv_head=8 does not divide"),
    ],
)
def test_bad_head_configs(n_head, n_kv_head, message):
    with pytest.raises(ValueError, match=message):
        HeadConfig(n_head, n_kv_head)


@pytest.mark.parametrize("heads", [mha(4), gqa(4, 2), mqa(4)], ids=lambda h: h.kind)
def test_fuse_unfuse_round_trip(heads):
    d_model, head_dim = 32, 8
    w_q = torch.randn(heads.n_head, d_model, head_dim)
    w_k, w_v = torch.randn(2, heads.n_kv_head, d_model, head_dim)
    fused = heads.fuse(w_q, w_k, w_v)
    assert fused.shape == (heads.qkv_features(head_dim), d_model)
    for before, after in zip((w_q, w_k, w_v), heads.unfuse(fused, head_dim), strict=True):
        assert torch.equal(before, after)
    assert torch.equal(heads.fuse(*heads.unfuse(fused, head_dim)), fused)


def test_mha_fused_weight_is_the_stack_of_wq_wk_wv():
    """docs/spec.md §2: for MHA the fused (3D, D) weight stacks W_Q, W_K, W_V; Q_h = X W_Q^h."""
    block = MultiHeadSelfAttention(16, 4, backend="eager")
    w_q, w_k, w_v = block.per_head_weights()
    x = torch.randn(5, 16)
    q_full = x @ _fused(block).weight[:16].T  # the W_Q slice of the fused projection
    for h in range(4):
        torch.testing.assert_close(x @ w_q[h], q_full[:, h * 4 : (h + 1) * 4])


def test_load_per_head_weights_changes_the_block():
    block = MultiHeadSelfAttention(16, 4, 2, backend="eager")
    w_q, w_k, w_v = (torch.zeros_like(w) for w in block.per_head_weights())
    block.load_per_head_weights(w_q, w_k, w_v)
    assert _fused(block).weight.abs().sum() == 0
    with pytest.raises(ValueError, match="expected 4/2/2"):
        block.load_per_head_weights(w_q, w_q, w_v)


def test_andrea_120m_attention_parameter_count():
    """docs/spec.md §3: 4 · 768² = 2,359,296 per layer without biases; 28.3M over 12 layers."""
    block = MultiHeadSelfAttention(768, 12, backend="sdpa", max_context=1024)
    per_layer = sum(p.numel() for p in block.parameters())
    assert per_layer == 4 * 768**2 == 2_359_296
    assert 12 * per_layer == 28_311_552
    assert [name for name, _ in block.named_parameters()] == ["qkv.weight", "proj.weight"]


def test_gqa_shrinks_only_the_kv_projection():
    block = MultiHeadSelfAttention(768, 12, 4, backend="sdpa", bias=True)
    assert _fused(block).weight.shape == ((12 + 2 * 4) * 64, 768)
    assert sum(p.numel() for p in block.parameters()) == (768 + 2 * 256) * 768 + 768 * 768 + (768 + 512) + 768


def _fused(block: MultiHeadSelfAttention) -> FusedQKV:
    """The block's fused W_Q, W_K, W_V (every block here has one: none is latent)."""
    assert block.qkv is not None
    return block.qkv
