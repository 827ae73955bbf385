"""Gated DeltaProduct (andrea.mixers.deltaproduct, andrea.ops.delta_rule.product): n delta steps a token are the
delta rule on T·n steps, every form computes fla-core 0.6.0's `naive_recurrent_gated_delta_product` (BTHD; k, v
and β with T·n rows, (g, beta) in that order; fp32 outputs), one step is Gated DeltaNet, and negative
eigenvalues double β."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from andrea.mixers.deltanet import DeltaNet, GatedDeltaNet
from andrea.mixers.deltaproduct import GatedDeltaProduct
from andrea.mixers.kda import KDA
from andrea.ops import delta_rule as dr
from andrea.ops.delta_rule import product
from tests.compose import QUICK, compose_train
from tests.fla_naive import fla_naive

B, H, T, K, V, N = 2, 3, 23, 8, 5, 3


def _inputs():
    torch.manual_seed(0)
    q = F.normalize(torch.randn(B, H, T, K, dtype=torch.float64), dim=-1)
    k = F.normalize(torch.randn(B, H, T * N, K, dtype=torch.float64), dim=-1)
    v = torch.randn(B, H, T * N, V, dtype=torch.float64)
    beta = 2 * torch.rand(B, H, T * N, dtype=torch.float64)  # (0, 2): negative eigenvalues too
    g = F.logsigmoid(torch.randn(B, H, T, dtype=torch.float64) + 2)
    return q, k, v, beta, g


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_every_form_is_fla_s_gated_delta_product(form):
    q, k, v, beta, g = _inputs()
    q_n, g_n, _ = product.steps(q, g, None, N)
    o, s = dr.run(form, q_n, k, v, beta, g_n, K**-0.5, None, chunk=8)
    bthd = [x.transpose(1, 2) for x in (q, k, v, g, beta)]
    o_fla, s_fla = fla_naive("gated_delta_product").naive_recurrent_gated_delta_product(
        *bthd, scale=K**-0.5, output_final_state=True, num_householder=N
    )
    torch.testing.assert_close(product.outputs(o, N), o_fla.transpose(1, 2).double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, s_fla.double(), rtol=1e-5, atol=1e-5)


def test_the_implied_weights_sum_each_token_s_writes():
    """With one value a token repeated over its n writes, the summed weights times it are the output."""
    q, k, v, beta, g = _inputs()
    v = v[:, :, ::N].repeat_interleave(N, dim=2)
    q_n, g_n, _ = product.steps(q, g, None, N)
    o, _ = dr.parallel(q_n, k, v, beta, g_n, 0.3)
    w = product.weights(q, k, beta, g, 0.3, None, N)
    assert w.shape == (B, H, T, T) and w.triu(1).abs().max() == 0
    torch.testing.assert_close(w @ v[:, :, ::N], product.outputs(o, N), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("neg", [False, True], ids=["beta", "neg_eigval"])
def test_one_householder_step_is_gated_deltanet(neg):
    torch.manual_seed(0)
    one = GatedDeltaProduct(16, 32, n_head=2, n_householder=1, allow_neg_eigval=neg).double()
    gdn = GatedDeltaNet(16, 32, n_head=2, allow_neg_eigval=neg).double()
    gdn.load_state_dict(one.state_dict())
    x = torch.randn(2, 19, 16, dtype=torch.float64)
    torch.testing.assert_close(one(x)[0], gdn(x)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", [DeltaNet, GatedDeltaNet])
def test_negative_eigenvalues_double_beta(cls):
    """allow_neg_eigval: β = 2 sigmoid(W_β x), so some β pass 1 (the eigenvalue 1 - β along k below 0)."""
    torch.manual_seed(0)
    x = torch.randn(2, 40, 16)
    plain, neg = cls(16, 64, n_head=2), cls(16, 64, n_head=2, allow_neg_eigval=True)
    neg.load_state_dict(plain.state_dict())
    torch.testing.assert_close(neg.beta(x), 2 * plain.beta(x))
    assert (neg.beta(x) > 1).any()


def test_gated_deltaproduct_trains_from_the_command_line(tmp_path):
    from andrea.train.pipeline import train

    overrides = [*QUICK, "mixer=gated_deltaproduct", "mixer.n_householder=2", "mixer.allow_neg_eigval=true"]
    result = train(compose_train(tmp_path, [*overrides, "trainer.max_steps=3", "~callbacks.attention_maps"]))
    assert result.status == "completed" and result.global_step == 3
    assert result.cache_bytes is not None and result.cache_bytes["layers"][0]["mixer"] == "gated_deltaproduct"


def test_a_householder_count_that_is_not_a_count_is_refused(tmp_path):
    from andrea.train.errors import ConfigError
    from andrea.train.pipeline import train

    with pytest.raises((ConfigError, ValueError), match="mixer.n_householder"):
        train(compose_train(tmp_path, [*QUICK, "mixer=gated_deltaproduct", "mixer.n_householder=0"]))


@pytest.mark.parametrize("mask_name", ["causal", "document", "padding"])
@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
@pytest.mark.parametrize("cls", [DeltaNet, GatedDeltaNet, GatedDeltaProduct, KDA])
def test_with_negative_eigenvalues_every_form_is_the_recurrence(cls, form, mask_name):
    """In float64, the output and every gradient of each form equal the layer's reference under each mask, and
    decoding token by token from a cache gives the same outputs."""
    from andrea.testing.mixer_checks import MASKS

    torch.manual_seed(0)
    layer = cls(16, 21, n_head=2, form=form, chunk=8, allow_neg_eigval=True).double()
    x, mask = torch.randn(2, 21, 16, dtype=torch.float64, requires_grad=True), MASKS[mask_name]
    out, expected = layer(x, mask=mask)[0], layer.reference(x, mask)
    assert (layer.beta(x.detach()) > 1).any()
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    grads = torch.autograd.grad(out.sum(), [x, *layer.parameters()])
    expected_grads = torch.autograd.grad(expected.sum(), [x, *layer.parameters()])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)
    with torch.no_grad():
        cache = layer.new_cache()
        steps = [layer(x[:, t : t + 1].detach(), mask=mask, cache=cache)[0] for t in range(21)]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected.detach(), rtol=1e-10, atol=1e-10)
