"""Stick-breaking attention (andrea.attention.mechanisms.stickbreaking) on a backend is fla-core 0.6.0's
`naive_stickbreaking_attn` (BTHD; keys before the query, or up to it with attend_current; the leftover dropped),
its first token reads nothing, and it trains from `mechanism=`."""

from __future__ import annotations

import pytest
import torch

from andrea.attention import Causal, get_backend
from andrea.attention.registry import get_mechanism
from andrea.testing.checks import MECHANISM_SIZES
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train
from tests.fla_naive import fla_naive

B, H, T, D = 2, 4, 13, 8


@pytest.mark.parametrize("attend_current", [False, True])
def test_eager_is_fla_s_stick_breaking(attend_current):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, dtype=torch.float64) for _ in range(3))
    mechanism = get_mechanism(
        "stickbreaking", dict(MECHANISM_SIZES, n_head=H, head_dim=D), attend_current=attend_current
    )
    out, weights = get_backend("eager")(q, k, v, mask=Causal(), scale=D**-0.5, need_weights=True, mechanism=mechanism)
    o_fla, left = fla_naive("stickbreaking_attn").naive_stickbreaking_attn(
        *(x.transpose(1, 2) for x in (q, k, v)), attend_current=attend_current
    )
    torch.testing.assert_close(out, o_fla.transpose(1, 2), rtol=1e-10, atol=1e-10)
    assert weights is not None
    torch.testing.assert_close(1 - weights.sum(-1), left.transpose(1, 2), rtol=1e-10, atol=1e-10)  # the leftover
    if not attend_current:
        assert out[:, :, 0].abs().max() == 0  # the first token has no key before it


def test_stick_breaking_trains_from_the_command_line(tmp_path):
    result = train(compose_train(tmp_path, [*QUICK, "mechanism=stickbreaking", "trainer.max_steps=3"]))
    assert result.status == "completed" and result.global_step == 3
