"""A recurrent mixer under a per-batch mask (andrea.mixers.state_masks): packed documents restart its state and
its short convolution at each boundary, key padding stays out of its state, in every form and when generating
from a cache; a mask a state cannot follow is refused in one line."""

from __future__ import annotations

import pytest
import torch

from andrea.attention.masks import Document, KeyPadding, SlidingWindow
from andrea.mixers.gla import GLA
from andrea.mixers.linear import LinearAttention
from andrea.mixers.mamba2 import Mamba2
from andrea.mixers.retention import Retention

D, T = 16, 21
IDS = torch.tensor([[0] * 4 + [1] * 10 + [2] * 7, [5] * 12 + [3] * 9])  # a boundary inside a chunk of 8, and on one
LAYERS = {
    "linear": lambda form: LinearAttention(D, 64, n_head=4, form=form, chunk=8, conv=True),
    "retention": lambda form: Retention(D, 64, n_head=4, form=form, chunk=8, conv=True),
    "gla": lambda form: GLA(D, 64, n_head=4, form=form, chunk=8, conv=True),
    "mamba2": lambda form: Mamba2(D, 64, n_head=4, d_state=8, form=form, chunk=8),
}


def _layer(name: str, form: str = "chunked"):
    torch.manual_seed(0)
    return LAYERS[name](form).double()


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
@pytest.mark.parametrize("name", LAYERS)
def test_each_packed_document_is_mixed_as_if_alone(name, form):
    layer, x = _layer(name, form), torch.randn(2, T, D, dtype=torch.float64)
    y, weights = layer(x, mask=Document(IDS), return_weights=True)
    for b in range(2):
        for doc in IDS[b].unique():
            part = IDS[b] == doc
            alone, _ = layer(x[b : b + 1, part])
            torch.testing.assert_close(y[b : b + 1, part], alone, rtol=1e-9, atol=1e-9)
    apart = IDS.unsqueeze(2) != IDS.unsqueeze(1)  # (B, T, T): query and key in two documents
    assert weights is not None and weights.transpose(0, 1)[:, apart].abs().max() == 0


@pytest.mark.parametrize("name", LAYERS)
def test_generation_continues_the_last_document(name):
    """Prefill 16 tokens of a packed row, then 5 one at a time: the whole row's outputs, boundaries included."""
    layer, x = _layer(name), torch.randn(2, T, D, dtype=torch.float64)
    whole, _ = layer(x, mask=Document(IDS))
    cache = layer.new_cache()
    steps = [layer(x[:, :16], mask=Document(IDS), cache=cache)[0]]
    steps += [layer(x[:, t : t + 1], mask=Document(IDS), cache=cache)[0] for t in range(16, T)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
@pytest.mark.parametrize("name", LAYERS)
def test_padding_stays_out_of_the_state(name, form):
    """Sequences of 13 and 21 real tokens: the state after the padded prefill is the one after the real tokens."""
    layer, x = _layer(name, form), torch.randn(2, T, D, dtype=torch.float64)
    padded = layer.new_cache()
    layer(x, mask=KeyPadding(torch.tensor([13, T])), cache=padded)
    real = layer.new_cache()
    layer(x[:1, :13], cache=real)
    assert padded.state is not None and real.state is not None
    torch.testing.assert_close(padded.state[:1], real.state, rtol=1e-9, atol=1e-9)
    whole = layer.new_cache()
    layer(x[1:], cache=whole)
    torch.testing.assert_close(padded.state[1:], whole.state, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", LAYERS)
def test_a_window_is_refused_in_one_line(name):
    with pytest.raises(ValueError, match=rf"mixer {name}: mask sliding_window_3 is not one a recurrent state can"):
        _layer(name)(torch.randn(1, T, D, dtype=torch.float64), mask=SlidingWindow(3))
