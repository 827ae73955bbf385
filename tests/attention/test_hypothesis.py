"""Property tests over random shapes: every backend agrees with naive, rows are distributions."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from andrea.attention import Causal, KeyPadding, NoMask, PrefixLM, SlidingWindow, get_backend

from .helpers import BACKENDS


@st.composite
def attention_problem(draw):
    batch = draw(st.integers(1, 3))
    n_kv_head = draw(st.integers(1, 3))
    n_head = n_kv_head * draw(st.integers(1, 3))
    kv_len = draw(st.integers(1, 20))
    q_len = draw(st.integers(1, kv_len))
    head_dim = draw(st.sampled_from([1, 4, 8, 16]))
    lengths = torch.tensor(draw(st.lists(st.integers(0, kv_len), min_size=batch, max_size=batch)))
    mask = draw(
        st.sampled_from(
            [
                None,
                NoMask(),
                Causal(),
                SlidingWindow(draw(st.integers(1, 6))),
                PrefixLM(draw(st.integers(0, 6))),
                Causal() & KeyPadding(lengths),
            ]
        )
    )
    seed = draw(st.integers(0, 2**16))
    return batch, n_head, n_kv_head, q_len, kv_len, head_dim, mask, seed


@pytest.mark.slow  # reason: random shapes on every backend, flex and the interpreter among them (about 3 s)
@given(problem=attention_problem(), backend=st.sampled_from(BACKENDS[1:]))
def test_backends_agree_on_random_shapes(problem, backend):
    batch, n_head, n_kv_head, q_len, kv_len, head_dim, mask, seed = problem
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, n_head, q_len, head_dim, generator=generator)
    k, v = torch.randn(2, batch, n_kv_head, kv_len, head_dim, generator=generator)
    with torch.no_grad():
        expected, weights = get_backend("naive")(q, k, v, mask, need_weights=True)
        out, probe = get_backend(backend)(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(probe, weights, atol=1e-6, rtol=1e-5)
    assert weights is not None
    assert (weights >= 0).all()
    row_sums = weights.sum(-1)
    empty = row_sums == 0  # only rows with no key at all (padding) may sum to 0
    torch.testing.assert_close(row_sums[~empty], torch.ones_like(row_sums[~empty]), atol=1e-5, rtol=0)
    if mask is None or mask.attends_self:
        assert not empty.any()
