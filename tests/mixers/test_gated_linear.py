"""Gated linear attention's three forms (andrea.ops.gated_linear) compute one function, and it is the one
fla-core 0.6.0's pure-PyTorch references compute for linear attention, retention, GLA and Mamba-2's SSD (MIXERS.md).
fla-core's naive files are loaded by path: importing `fla` loads every kernel (6 s) for functions that need none."""

from __future__ import annotations

import math

import pytest
import torch

from andrea.ops import gated_linear as gl
from tests.fla_naive import fla_naive

B, H, T, K, V = 2, 3, 37, 8, 5


def _inputs(per_channel: bool, dtype=torch.float64):
    torch.manual_seed(0)
    q, k, v = (
        torch.randn(B, H, T, K, dtype=dtype),
        torch.randn(B, H, T, K, dtype=dtype),
        torch.randn(B, H, T, V, dtype=dtype),
    )
    shape = (B, H, T, K) if per_channel else (B, H, T)
    g = torch.nn.functional.logsigmoid(torch.randn(shape, dtype=dtype) + 2)  # decays in (0, 1), some near 1
    return q, k, v, g


@pytest.mark.parametrize("per_channel", [True, False], ids=["gate per key channel", "gate per head"])
@pytest.mark.parametrize("form", ["parallel", "chunked"])
def test_every_form_computes_the_recurrence(form, per_channel):
    """From a given state, T = 37 (chunks of 16: the last one padded), float64: outputs and final states agree."""
    q, k, v, g = _inputs(per_channel)
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    o_ref, s_ref = gl.recurrent(q, k, v, g, scale=0.3, state=state)
    if form == "parallel":
        o, s = gl.parallel(q, k, v, g, scale=0.3, state=state)
    else:
        o, s = gl.chunked(q, k, v, g, scale=0.3, state=state, chunk=16)
    torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s, s_ref, rtol=1e-10, atol=1e-10)


def test_a_state_carries_a_sequence_across_calls():
    """Prefill then decode: the first 30 tokens chunked, then 7 one at a time from its state, give the whole's."""
    q, k, v, g = _inputs(True)
    whole, _ = gl.chunked(q, k, v, g)
    first, state = gl.chunked(q[:, :, :30], k[:, :, :30], v[:, :, :30], g[:, :, :30])
    steps = []
    for t in range(30, T):
        o, state = gl.recurrent(
            q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], g[:, :, t : t + 1], state=state
        )
        steps.append(o)
    torch.testing.assert_close(torch.cat([first, *steps], dim=2), whole, rtol=1e-10, atol=1e-10)


def _bthd(x):
    return x.transpose(1, 2).float()


def test_gla_is_fla_s_naive_recurrent_gla():
    q, k, v, g = _inputs(True)
    o_fla, s_fla = fla_naive("gla").naive_recurrent_gla(_bthd(q), _bthd(k), _bthd(v), _bthd(g), output_final_state=True)
    o, s = gl.chunked(q, k, v, g, scale=K**-0.5)
    torch.testing.assert_close(o.float(), o_fla.transpose(1, 2), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(s.float(), s_fla, rtol=1e-4, atol=1e-4)  # fla's state is (B, H, K, V) too


def test_mamba2_s_ssd_is_fla_s_naive_recurrent_simple_gla_at_scale_1():
    q, k, v, g = _inputs(False)
    o_fla, s_fla = fla_naive("simple_gla").naive_recurrent_simple_gla(_bthd(q), _bthd(k), _bthd(v), _bthd(g), scale=1.0)
    o, s = gl.chunked(q, k, v, g, scale=1.0)
    torch.testing.assert_close(o.float(), o_fla.transpose(1, 2), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(s.float(), s_fla, rtol=1e-4, atol=1e-4)


def test_linear_attention_is_fla_s_naive_recurrent_linear_attn():
    q, k, v, _ = _inputs(False)
    o_fla = fla_naive("linear_attn").naive_recurrent_linear_attn(_bthd(q), _bthd(k), _bthd(v))[0]
    o, _ = gl.chunked(q, k, v, None, scale=K**-0.5)  # no decay
    torch.testing.assert_close(o.float(), o_fla.transpose(1, 2), rtol=1e-4, atol=1e-4)


def test_retention_is_fla_s_naive_retention():
    """RetNet's fixed decay per head, γ_h = 1 - 2^(-5-h), as a log gate on every token; fla's layout is BHTD."""
    q, k, v, _ = _inputs(False)
    gamma = 1 - 2.0 ** (-5.0 - torch.arange(H, dtype=torch.float64))
    g = gamma.log().view(1, H, 1).expand(B, H, T)
    o_fla = fla_naive("retention").naive_retention(q.float(), k.float(), v.float())
    o, _ = gl.chunked(q, k, v, g, scale=1 / math.sqrt(K))
    torch.testing.assert_close(o.float(), o_fla, rtol=1e-4, atol=1e-4)


def test_the_implied_weights_are_the_parallel_form_s():
    """weights() times V is the parallel form from an empty state: what the maps draw is what the layer computes."""
    q, k, v, g = _inputs(True)
    torch.testing.assert_close(gl.weights(q, k, g, scale=0.5) @ v, gl.parallel(q, k, v, g, scale=0.5)[0])
    assert bool((gl.weights(q, k, g).triu(1) == 0).all())  # causal: no query sees a later key


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_a_new_document_restarts_the_state(form):
    """Packed documents (their numbers `seg`, chunks of 16 that a boundary crosses): each document's outputs are
    the recurrence's over that document alone, the first one's from the given state, the final state the last
    one's."""
    q, k, v, g = _inputs(True)
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    seg = torch.tensor([[0] * 5 + [1] * 20 + [2] * 12, [0] * 30 + [1] * 7])
    o, s = gl.run(form, q, k, v, g, 0.3, state, seg, chunk=16)
    for b in range(B):
        for doc in seg[b].unique().tolist():
            part = seg[b] == doc
            q1, k1, v1, g1 = (x[b : b + 1, :, part] for x in (q, k, v, g))
            o_doc, s_doc = gl.recurrent(q1, k1, v1, g1, 0.3, state[b : b + 1] if doc == 0 else None)
            torch.testing.assert_close(o[b : b + 1, :, part], o_doc, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(s[b : b + 1], s_doc, rtol=1e-10, atol=1e-10)
    across = (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1).expand(B, H, T, T)  # query and key apart
    weights = gl.weights(q, k, g, 0.3, seg)
    seen = ~across & torch.ones(T, T, dtype=torch.bool).tril()  # a key at or before the query in its document
    assert weights[across].abs().max() == 0 and weights[seen].abs().min() > 0


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_under_bfloat16_autocast_the_state_stays_float32(form):
    """bfloat16 q, k, v (what autocast's projections give): the output and the state are the float32 run's, to
    the bit, and the state is float32."""
    q, k, v, g = (x.to(torch.bfloat16) for x in _inputs(True, torch.float32))
    plain = gl.run(form, q, k, v, g.float(), 0.3, None, chunk=16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = gl.run(form, q, k, v, g.float(), 0.3, None, chunk=16)
    assert autocast[1].dtype == torch.float32
    assert torch.equal(autocast[0], plain[0]) and torch.equal(autocast[1], plain[1])
