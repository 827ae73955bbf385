"""The delta rule's three forms (andrea.ops.delta_rule) compute one function, and it is fla-core 0.6.0's:
`delta_rule_recurrence` for DeltaNet (q and k L2-normalised before the call: it does not normalise; its scale is
1/sqrt(K), fixed) and `naive_recurrent_gated_delta_rule` for Gated DeltaNet (BTHD layout; (beta, g) in that
order; fp32 outputs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from andrea.ops import delta_rule as dr
from tests.fla_naive import fla_naive

B, H, T, K, V = 2, 3, 37, 8, 5


def _inputs(dtype=torch.float64):
    torch.manual_seed(0)
    q, k = (
        F.normalize(torch.randn(B, H, T, K, dtype=dtype), dim=-1),
        F.normalize(torch.randn(B, H, T, K, dtype=dtype), dim=-1),
    )
    v = torch.randn(B, H, T, V, dtype=dtype)
    beta = torch.rand(B, H, T, dtype=dtype)
    g = F.logsigmoid(torch.randn(B, H, T, dtype=dtype) + 2)
    return q, k, v, beta, g


@pytest.mark.parametrize("gated", [False, True], ids=["deltanet", "gated"])
@pytest.mark.parametrize("form", ["parallel", "chunked"])
def test_every_form_computes_the_recurrence(form, gated):
    """From a given state, T = 37 (chunks of 16, the last padded), float64: outputs and final states agree."""
    q, k, v, beta, g = _inputs()
    g = g if gated else None
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    o_ref, s_ref = dr.recurrent(q, k, v, beta, g, 0.3, state)
    o, s = dr.run(form, q, k, v, beta, g, 0.3, state, chunk=16)
    torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s, s_ref, rtol=1e-10, atol=1e-10)


def test_the_implied_weights_times_v_are_the_output():
    q, k, v, beta, g = _inputs()
    o, _ = dr.parallel(q, k, v, beta, g, 0.3)
    w = dr.weights(q, k, beta, g, 0.3)
    torch.testing.assert_close(w @ v, o, rtol=1e-10, atol=1e-10)
    assert w.triu(1).abs().max() == 0 and (w < 0).any()  # causal, and signed


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_a_new_document_restarts_the_state(form):
    q, k, v, beta, g = _inputs()
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    seg = torch.tensor([[0] * 5 + [1] * 20 + [2] * 12, [0] * 30 + [1] * 7])
    o, s = dr.run(form, q, k, v, beta, g, 0.3, state, seg, chunk=16)
    for b in range(B):
        for doc in seg[b].unique().tolist():
            part = seg[b] == doc
            one = [x[b : b + 1, :, part] for x in (q, k, v, beta, g)]
            o_doc, s_doc = dr.recurrent(
                one[0], one[1], one[2], one[3], one[4], 0.3, state[b : b + 1] if doc == 0 else None
            )
            torch.testing.assert_close(o[b : b + 1, :, part], o_doc, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(s[b : b + 1], s_doc, rtol=1e-10, atol=1e-10)


def test_deltanet_is_fla_s_delta_rule():
    q, k, v, beta, _ = _inputs()
    o, s = dr.chunked(q, k, v, beta, None, K**-0.5)
    o_fla, s_fla = fla_naive("delta_rule").delta_rule_recurrence(q, k, v, beta)  # computed in fp32
    torch.testing.assert_close(o, o_fla, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, s_fla.double(), rtol=1e-5, atol=1e-5)


def test_gated_deltanet_is_fla_s_gated_delta_rule():
    q, k, v, beta, g = _inputs()
    o, s = dr.chunked(q, k, v, beta, g, K**-0.5)
    bthd = [x.transpose(1, 2) for x in (q, k, v, beta, g)]
    o_fla, s_fla = fla_naive("gated_delta_rule").naive_recurrent_gated_delta_rule(*bthd, output_final_state=True)
    torch.testing.assert_close(o, o_fla.transpose(1, 2).double(), rtol=1e-5, atol=1e-5)  # fla returns fp32
    torch.testing.assert_close(s, s_fla.double(), rtol=1e-5, atol=1e-5)
