"""The named masks are compositions of primitives: their predicate, parameters and flags are the
combination's, and the causal part is found by walking the parts."""

import pytest
import torch

from andrea.attention import Causal, PrefixLM, SlidingWindow
from andrea.attention.masks import FLAGS, Combined
from andrea.attention.masks.primitives import Band, Prefix


def _matrix(mask, n=9):
    return mask.dense(n, n)[0, 0]


def _reference_window(n, w, causal):
    i, j = torch.arange(n).view(-1, 1), torch.arange(n).view(1, -1)
    near = (i - j < w) & (j - i < w)
    return near & (j <= i) if causal else near


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", [1, 3, 9])
def test_sliding_window_is_its_formula(window, causal):
    mask = SlidingWindow(window, causal=causal)
    assert torch.equal(_matrix(mask), _reference_window(9, window, causal))
    params = mask.params()
    assert params is not None
    q_idx, kv_idx = torch.meshgrid(torch.arange(9), torch.arange(9), indexing="ij")
    assert torch.equal(params.predicate(torch.tensor(0), q_idx, kv_idx), _reference_window(9, window, causal))


def test_prefix_lm_is_causal_or_the_prefix():
    i, j = torch.arange(9).view(-1, 1), torch.arange(9).view(1, -1)
    assert torch.equal(_matrix(PrefixLM(4)), (j <= i) | (j < 4))
    assert torch.equal(_matrix(PrefixLM(0)), _matrix(Causal()))


def test_the_causal_part_is_found_by_walking_the_parts():
    composed = SlidingWindow(5).composed
    assert isinstance(composed, Combined) and composed.op == "&"
    assert Causal() in composed.masks and Band(5) in composed.masks
    assert PrefixLM(3).composed == Causal() | Prefix(3)
    assert SlidingWindow(5, causal=False).composed == Band(5, both_ways=True)


@pytest.mark.parametrize("mask", [SlidingWindow(4), SlidingWindow(4, causal=False), PrefixLM(2)])
def test_flags_are_the_compositions(mask):
    for flag in FLAGS:
        assert getattr(mask, flag) == getattr(mask.composed, flag), flag
    assert mask.kinds == {mask.kind}  # a backend's mask_kinds still names it


def test_derived_flags_say_what_the_masks_promise():
    window = SlidingWindow(4)
    assert (window.is_causal, window.attends_self, window.translation_invariant, window.max_lookback) == (
        False, True, True, 4)  # fmt: skip
    prefix = PrefixLM(2)
    assert (prefix.is_causal, prefix.attends_self, prefix.translation_invariant, prefix.max_lookback) == (
        False, True, False, None)  # fmt: skip
