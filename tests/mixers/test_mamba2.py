"""Mamba-2's layer (andrea.mixers.mamba2): its three forms give one output, generation from its state and
convolution cache gives the tokens recomputing gives, and its SSD is fla-core's naive simple-GLA recurrence
with q = C, k = B, v = Δ·x, g = Δ·a and scale 1, plus the D skip (MIXERS.md), written out here by hand."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from andrea.mixers.mamba2 import Mamba2
from andrea.models.generate import generate
from andrea.models.gpt import GPT
from tests.fla_naive import fla_naive

D, T = 16, 21


def _layer(form: str) -> Mamba2:
    torch.manual_seed(0)
    return Mamba2(D, 64, n_head=4, d_state=8, form=form, chunk=8).double()


def test_the_three_forms_give_one_output():
    x = torch.randn(2, T, D, dtype=torch.float64)
    outputs = [_layer(form)(x)[0] for form in ("parallel", "chunked", "recurrent")]
    for out in outputs[1:]:
        torch.testing.assert_close(out, outputs[0], rtol=1e-9, atol=1e-9)


def test_the_ssd_is_fla_s_simple_gla_at_scale_one_plus_the_skip():
    layer, u = _layer("chunked").float(), torch.randn(2, T, D)
    H, P, N = layer.n_head, layer.head_dim, layer.d_state
    assert layer.conv is not None and layer.norm is not None  # both on, as published
    z, xbc, dt = layer.in_proj(u).split([layer.inner, layer.inner + 2 * N, H], dim=-1)
    xbc, _ = layer.conv(xbc)
    x, Bm, C = xbc.split([layer.inner, N, N], dim=-1)
    delta = F.softplus(dt + layer.dt_bias)  # (B, T, H)
    a = -layer.A_log.exp()
    x = x.view(2, T, H, P)  # fla's layout: (B, T, H, ·)
    q, k = C.unsqueeze(2).expand(2, T, H, N), Bm.unsqueeze(2).expand(2, T, H, N)
    y, _ = fla_naive("simple_gla").naive_recurrent_simple_gla(q, k, x * delta.unsqueeze(-1), delta * a, scale=1.0)
    y = y + layer.D.view(1, 1, H, 1) * x  # the D skip
    y = layer.norm(y.reshape(2, T, layer.inner) * F.silu(z))
    with torch.no_grad():
        torch.testing.assert_close(layer(u)[0], layer.proj(y), rtol=1e-4, atol=1e-5)


def test_generation_from_the_state_is_recomputing():
    torch.manual_seed(0)
    net = GPT(vocab_size=17, max_context=40, n_layer=2, d_model=D, attention=dict(n_head=4),
              mixer={"name": "mamba2", "n_head": 4, "d_state": 8}, layout=["mamba2", "attention"])  # fmt: skip
    idx = torch.randint(0, 17, (2, 5))
    cached = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0))
    recomputed = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0), use_cache=False)
    assert torch.equal(cached, recomputed)
    size = net.mixers[0].cache_size()
    assert size.per_token == 0 and size.per_sequence == 4 * 8 * 8 + 3 * (2 * D + 2 * 8)


def test_a_width_the_heads_do_not_split_is_refused():
    with pytest.raises(
        ValueError, match="mixer.n_head=5 must be a positive integer dividing mixer.expand x d_model = 2 x 16=32"
    ):
        Mamba2(D, 64, n_head=5)


def test_the_chunked_form_takes_the_chunk_it_is_given(chunks):
    _layer("chunked")(torch.randn(2, T, D, dtype=torch.float64))
    assert chunks == [8, 8, 8]  # 21 tokens, the last chunk padded


@pytest.mark.parametrize("part", ["conv", "gate", "norm"])
def test_each_published_part_is_a_setting(part):
    """Off, a part is gone (its parameters too) and the three forms still give one output."""
    torch.manual_seed(0)
    without: dict[str, Any] = {part: False}
    on, off = Mamba2(D, 64, n_head=4, d_state=8), Mamba2(D, 64, n_head=4, d_state=8, **without)
    assert sum(p.numel() for p in off.parameters()) < sum(p.numel() for p in on.parameters())
    x = torch.randn(2, T, D, dtype=torch.float64)
    outputs = []
    for form in ("parallel", "chunked", "recurrent"):
        torch.manual_seed(0)
        outputs.append(Mamba2(D, 64, n_head=4, d_state=8, form=form, chunk=8, **without).double()(x)[0])
    for out in outputs[1:]:
        torch.testing.assert_close(out, outputs[0], rtol=1e-9, atol=1e-9)
