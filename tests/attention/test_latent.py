"""Multi-head latent attention (heads=mla): the paper's formula by hand, the absorbed decoding form equal to the
expanded one, a cache that holds only the latent, generation equal to recomputing, pinned parameter counts,
and each refusal naming what to use instead."""

import math

import pytest
import torch

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.contract import UnsupportedAttentionError
from andrea.attention.kv_cache import LatentCache
from andrea.attention.latent import LatentAttention
from andrea.models.gpt import GPT
from tests.models.test_generate import cached_and_recomputed

D, H, R = 32, 4, 8  # d_model, heads (head_dim 8), kv_rank
SERVED = ["softmax", "sigmoid", "sink", "gated", "softcap"]


def block(backend="eager", mechanism=None, position="rope", **latent):
    torch.manual_seed(0)
    settings = {"kv_rank": R} | latent
    return MultiHeadSelfAttention(
        D, H, backend=backend, max_context=16, position=position, mechanism=mechanism, latent=settings
    )


def test_the_expanded_form_is_the_paper_s_formula():
    """q^h = [q_C^h ; RoPE(q_R^h)], k^h = [W_UK^h c_KV ; RoPE(k_R)], v^h = W_UV^h c_KV, c_KV = RMSNorm(W_DKV x),
    softmax(q k^T / sqrt(d + d_R)) v, written out one head at a time."""
    attention = block(position="rope")
    latent = attention.latent
    assert latent is not None and latent.rope_dim == 4  # head_dim / 2 with RoPE
    x = torch.randn(2, 6, D)
    y, weights = attention(x, return_weights=True)
    down = x @ latent.kv_down.weight.T  # (B, T, r + d_R)
    c, k_r = latent.kv_norm(down[..., :R]), latent.rotary(down[..., R:].unsqueeze(1), 0)[:, 0]  # (B, T, r), d_R
    q = (x @ latent.q_up.weight.T).view(2, 6, H, 12)  # (B, T, H, d + d_R)
    w_uk, w_uv = latent.kv_up.weight.view(2, H, 8, R)  # (H, d, r) each
    heads = []
    for h in range(H):
        q_h = torch.cat((q[:, :, h, :8], latent.rotary(q[:, None, :, h, 8:], 0)[:, 0]), dim=-1)  # (B, T, 12)
        k_h = torch.cat((c @ w_uk[h].T, k_r), dim=-1)  # (B, T, 12)
        scores = q_h @ k_h.transpose(1, 2) / math.sqrt(8 + 4)
        a = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -math.inf).softmax(-1)
        torch.testing.assert_close(weights[:, h], a)
        heads.append(a @ (c @ w_uv[h].T))  # (B, T, d)
    z = torch.stack(heads, dim=2).reshape(2, 6, D)
    torch.testing.assert_close(y, attention.proj(z))


@pytest.mark.parametrize("q_rank", [None, 16])
def test_the_latents_are_normalised_as_deepseek_v3_normalises_them(q_rank):
    """DeepSeek-V2/V3 normalise c_KV and c_Q with rms_norm_eps = 1e-6 (transformers' DeepseekV3RMSNorm, at its
    config's default); on latents this small, torch's default eps (1.2e-7 in float32) gives another output."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RMSNorm

    eps = DeepseekV3Config().rms_norm_eps
    assert eps == 1e-6
    latent = LatentAttention(D, H, 8, kv_rank=R, q_rank=q_rank)
    norms = [latent.kv_norm] + ([latent.q_norm] if q_rank else [])
    x = torch.randn(2, 6, D) * 1e-3  # mean square ~1e-6: eps matters
    for norm in norms:
        assert norm is not None
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
        theirs = DeepseekV3RMSNorm(norm.normalized_shape[0], eps=eps)
        theirs.load_state_dict(norm.state_dict())
        width = norm.normalized_shape[0]
        torch.testing.assert_close(norm(x[..., :width]), theirs(x[..., :width]), atol=1e-7, rtol=1e-6)
        default = torch.nn.functional.rms_norm(x[..., :width], (width,), norm.weight)  # torch's eps
        assert (norm(x[..., :width]) - default).abs().max() > 0.05
    other = LatentAttention(D, H, 8, kv_rank=R, norm_eps=1e-5).kv_norm
    assert other.eps == 1e-5 and LatentAttention(D, H, 8, kv_rank=R, norm_eps=None).kv_norm.eps is None


@pytest.mark.parametrize("mechanism", SERVED)
@pytest.mark.parametrize("position", ["rope", "learned"])
def test_decoding_in_the_absorbed_form_equals_the_expanded_form(mechanism, position):
    """Token by token through the cache (W_UK absorbed into the query, W_UV applied after the sum: the cache
    is never expanded) gives the expanded forward's outputs and weights."""
    attention = block(mechanism=mechanism, position=position).eval()
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        y, weights = attention(x, return_weights=True)
        cache = attention.new_cache()
        steps = [attention(x[:, t : t + 1], return_weights=True, cache=cache) for t in range(7)]
    torch.testing.assert_close(torch.cat([s[0] for s in steps], dim=1), y, atol=1e-5, rtol=1e-5)
    for t, (_, w) in enumerate(steps):
        torch.testing.assert_close(w[:, :, 0], weights[:, :, t, : t + 1], atol=1e-6, rtol=1e-5)


def test_the_cache_keeps_the_latent_only():
    attention = block(position="rope")
    cache = attention.new_cache()
    assert isinstance(cache, LatentCache)
    with torch.no_grad():
        attention(torch.randn(3, 5, D), cache=cache)
    assert cache.k is not None and cache.v is not None
    assert tuple(cache.k.shape) == (3, 1, 5, R + 4)  # (B, 1, S, r + d_R)
    assert cache.v.data_ptr() == cache.k.data_ptr()  # the values are a view of the latent, not a copy
    assert attention.cache_width() == R + 4 < 2 * H * 8  # against MHA's 2 · n_kv_head · head_dim


@pytest.mark.parametrize("backend", ["naive", "sdpa"])
def test_every_backend_that_declares_it_agrees_with_eager(backend):
    x = torch.randn(2, 6, D, requires_grad=True)
    reference = block("eager")
    other = block(backend)
    other.load_state_dict(reference.state_dict())
    torch.testing.assert_close(other(x)[0], reference(x)[0], atol=1e-5, rtol=1e-5)
    (grad,) = torch.autograd.grad(other(x)[0].sum(), x)
    (expected,) = torch.autograd.grad(reference(x)[0].sum(), x)
    torch.testing.assert_close(grad, expected, atol=1e-5, rtol=1e-5)


def test_a_gpt_with_latent_heads_generates_with_its_cache_as_without():
    torch.manual_seed(0)
    attention = dict(n_head=4, backend="sdpa", latent={"kv_rank": 8})
    model = GPT(vocab_size=61, max_context=24, n_layer=2, d_model=32, attention=attention, position="rope").eval()
    prompt = torch.randint(61, (2, 5), generator=torch.Generator().manual_seed(1))
    tokens, logits = cached_and_recomputed(model, prompt)
    assert torch.equal(tokens[True], tokens[False])
    torch.testing.assert_close(logits[True], logits[False], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "latent, rope, expected",
    [  # d_model 64, 4 heads of 16, kv_rank 16
        ({"kv_rank": 16}, True, 64 * 4 * 24 + 64 * 24 + 16 + 16 * 2 * 64),  # q, [W_DKV; W_KR], its norm, W_UK; W_UV
        ({"kv_rank": 16}, False, 64 * 4 * 16 + 64 * 16 + 16 + 16 * 2 * 64),  # no decoupled RoPE part
        ({"kv_rank": 16, "q_rank": 32, "rope_dim": 4}, True, 64 * 32 + 32 + 32 * 4 * 20 + 64 * 20 + 16 + 16 * 128),
    ],
)
def test_parameter_counts(latent, rope, expected):
    assert sum(p.numel() for p in LatentAttention(64, 4, 16, **latent, rope=rope).parameters()) == expected
    assert expected < 3 * 64 * 64  # fewer than MHA's fused QKV (12,288) at this rank


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(n_kv_head=2), ValueError, "heads.n_kv_head=2 must equal heads.n_head=4"),
        (dict(backend="triton"), UnsupportedAttentionError, "needs values of the queries' size, which heads=mla's"),
        (dict(mechanism="qknorm"), ValueError, "mechanism=qknorm changes queries and keys itself"),
        (dict(mechanism="diff"), ValueError, "mechanism=diff changes queries and keys itself"),
        (dict(latent={"kv_rank": 0}), ValueError, "heads.latent.kv_rank=0 must be a positive integer"),
        (dict(latent={"kv_rank": 8, "rank": 2}), ValueError, "heads.latent.rank is not a setting of latent attention"),
        (dict(latent={"kv_rank": 8, "norm_eps": 0}), ValueError, "heads.latent.norm_eps=0 must be a finite number > 0"),
        (dict(latent={"kv_rank": 8, "rope_dim": 3}), ValueError, "heads.latent.rope_dim=3 must be even: RoPE turns"),
    ],
)
def test_refusals(kwargs, error, message):
    settings = dict(n_head=H, backend="eager", position="rope", latent={"kv_rank": R}) | kwargs
    with pytest.raises(error, match=message.replace("(", "\\(").replace(")", "\\)")):
        MultiHeadSelfAttention(D, max_context=16, **settings)
