"""The diagonal-plus-low-rank recurrence's forms (andrea.ops.dplr) compute one function, and it is fla-core 0.6.0's
`dplr_recurrence` (BHTD; q scaled by K^-1/2 inside; S_t = (diag(exp gk) + beta alphaᵀ) S_{t-1} + k vᵀ; float32,
alpha too), on RWKV-7's a = -κ̂, b = κ̂ ⊙ rate and log decay -exp(-1/2) sigmoid(·)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from andrea.ops import dplr
from tests.fla_naive import fla_naive

B, H, T, K, V = 2, 3, 37, 8, 5


def _inputs():
    torch.manual_seed(0)
    q, k = torch.randn(B, H, T, K, dtype=torch.float64), torch.randn(B, H, T, K, dtype=torch.float64)
    v = torch.randn(B, H, T, V, dtype=torch.float64)
    kk = F.normalize(torch.randn(B, H, T, K, dtype=torch.float64), dim=-1)
    rate = torch.rand(B, H, T, K, dtype=torch.float64)
    g = -torch.exp(torch.tensor(-0.5)) * torch.sigmoid(torch.randn(B, H, T, K, dtype=torch.float64))  # RWKV-7's
    return q, k, v, -kk, kk * rate, g


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_every_form_is_fla_s_dplr_recurrence(form):
    q, k, v, a, b, g = _inputs()
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    o, s = dplr.run(form, q, k, v, a, b, g, K**-0.5, state, chunk=16)
    fp32 = [x.float() for x in (q, k, v, a, b, g)]  # fla's reference casts all but alpha to float32
    o_fla, s_fla = fla_naive("generalized_delta_rule/dplr").dplr_recurrence(*fp32, initial_state=state.float())
    torch.testing.assert_close(o, o_fla.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, s_fla.double(), rtol=1e-5, atol=1e-5)


def test_the_implied_weights_times_v_are_the_output():
    q, k, v, a, b, g = _inputs()
    o, _ = dplr.parallel(q, k, v, a, b, g, 0.3)
    torch.testing.assert_close(dplr.weights(q, k, a, b, g, 0.3) @ v, o, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_a_new_document_restarts_the_state(form):
    q, k, v, a, b, g = _inputs()
    seg = torch.tensor([[0] * 5 + [1] * 20 + [2] * 12, [0] * 30 + [1] * 7])
    o, _ = dplr.run(form, q, k, v, a, b, g, 0.3, None, seg, chunk=16)
    for row in range(B):
        for doc in seg[row].unique().tolist():
            part = seg[row] == doc
            q_d, k_d, v_d, a_d, b_d, g_d = (x[row : row + 1, :, part] for x in (q, k, v, a, b, g))
            alone, _ = dplr.recurrent(q_d, k_d, v_d, a_d, b_d, g_d, 0.3)
            torch.testing.assert_close(o[row : row + 1, :, part], alone, rtol=1e-10, atol=1e-10)


def test_a_decay_the_chunks_cannot_take_is_refused_in_one_line():
    q, k, v, a, b, g = _inputs()
    g[0, 0, 3, 0] = -30.0
    with pytest.raises(ValueError, match=r"log decay of -30 a token is below -20.*use form=recurrent"):
        dplr.run("chunked", q, k, v, a, b, g, 0.3, None)
    assert torch.isfinite(dplr.recurrent(q, k, v, a, b, g, 0.3)[0]).all()
