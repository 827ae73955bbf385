"""Kimi Delta Attention (andrea.mixers.kda): the delta rule with a decay per key channel (andrea.ops.delta_rule),
every form equal to fla-core 0.6.0's `naive_recurrent_kda` and `naive_chunk_kda` (BTHD; (g, beta) in that order;
fp32 outputs), the sub-chunked decayed products (andrea.ops.decayed) equal to the sum as written and finite where
a chunk's decay underflows, and the mixer trained and sampled from the command line."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from andrea.mixers.kda import KDA
from andrea.ops import delta_rule as dr
from andrea.ops.decayed import SUB, decayed
from tests.fla_naive import fla_naive
from tests.mixers.command_line import trains_and_samples

B, H, T, K, V = 2, 3, 48, 8, 5


def _inputs():
    torch.manual_seed(0)
    q, k = (F.normalize(torch.randn(B, H, T, K, dtype=torch.float64), dim=-1) for _ in range(2))
    v = torch.randn(B, H, T, V, dtype=torch.float64)
    beta = torch.rand(B, H, T, dtype=torch.float64)
    g = F.logsigmoid(torch.randn(B, H, T, K, dtype=torch.float64) + 2)  # one decay a key channel
    return q, k, v, beta, g


@pytest.mark.parametrize("fla_form", ["naive_recurrent_kda", "naive_chunk_kda"])
@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_every_form_is_fla_s_kda(form, fla_form):
    """From a given state, outputs and final states (fla's chunk: chunks of 16, T a multiple)."""
    q, k, v, beta, g = _inputs()
    state = torch.randn(B, H, K, V, dtype=torch.float64)
    o, s = dr.run(form, q, k, v, beta, g, K**-0.5, state, chunk=16)
    bthd = [x.transpose(1, 2) for x in (q, k, v, g, beta)]
    extra = {"chunk_size": 16} if fla_form == "naive_chunk_kda" else {}
    o_fla, s_fla = getattr(fla_naive("kda"), fla_form)(
        *bthd, scale=K**-0.5, initial_state=state, output_final_state=True, **extra
    )
    torch.testing.assert_close(o, o_fla.transpose(1, 2).double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, s_fla.double(), rtol=1e-5, atol=1e-5)


def _as_written(a, b, G):
    """Σ_c a_ic b_jc exp(G_ic - G_jc) for j <= i, the (C, C, K) product in float64."""
    gap = (G.unsqueeze(3) - G.unsqueeze(2)).masked_fill(torch.ones(G.shape[2], G.shape[2]).triu(1).bool()[..., None],
                                                          float("-inf"))  # fmt: skip
    return torch.einsum("bhik,bhjk,bhijk->bhij", a, b, gap.exp())


@pytest.mark.parametrize("C", [SUB - 3, 2 * SUB, 64, 53])
def test_sub_chunks_compute_the_decayed_scores_as_written(C):
    torch.manual_seed(0)
    a, b = torch.randn(2, 3, C, K, dtype=torch.float64), torch.randn(2, 3, C, K, dtype=torch.float64)
    G = F.logsigmoid(torch.randn(2, 3, C, K, dtype=torch.float64)).cumsum(2)
    torch.testing.assert_close(decayed(a, b, G), _as_written(a, b, G), rtol=1e-12, atol=1e-12)


def test_a_decay_that_underflows_inside_a_chunk_stays_finite():
    """exp(G) of a chunk's last token underflows float32 (G ~ -600): a split into exp(G_i) and exp(-G_j) would
    overflow; the sub-chunks' factors never pass 1, and the scores and gradients equal float64's."""
    torch.manual_seed(0)
    a, b = torch.randn(1, 2, 64, K), torch.randn(1, 2, 64, K)
    G = (-10 * torch.rand(1, 2, 64, K)).cumsum(2).requires_grad_()
    got = decayed(a, b, G)
    want = _as_written(a.double(), b.double(), G.double())
    assert G.min() < -200 and torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    got.sum().backward()
    assert G.grad is not None and torch.isfinite(G.grad).all()


def test_the_implied_weights_times_v_are_the_output():
    q, k, v, beta, g = _inputs()
    o, _ = dr.parallel(q, k, v, beta, g, 0.3)
    w = dr.weights(q, k, beta, g, 0.3)
    torch.testing.assert_close(w @ v, o, rtol=1e-10, atol=1e-10)


def test_the_layer_decays_each_key_channel_by_its_own_rate():
    layer = KDA(32, 16, n_head=4)
    g = layer.log_decay(torch.randn(2, 7, 32))
    assert g.shape == (2, 4, 7, 8) and (g < 0).all() and g[0, 0, 0].unique().numel() == 8


def test_kda_trains_and_samples_from_the_command_line(tmp_path):
    trains_and_samples(tmp_path, "kda", "mixer.allow_neg_eigval=true")
