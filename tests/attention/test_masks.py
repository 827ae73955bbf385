"""Each mask strategy against its pattern written out by hand, and their composition."""

from pathlib import Path

import pytest
import torch

from andrea.attention import Causal, Document, KeyPadding, NoMask, PrefixLM, SlidingWindow, parse_mask
from andrea.attention.masks import PrecomputedMask
from andrea.attention.masks.draw import mask_as_text

T = 6


def grid(mask, q_len=T, kv_len=T, batch=1, index=0):
    return mask.dense(q_len, kv_len, batch_size=batch)[index, 0].int().tolist()


def by_hand(rule, q_len=T, kv_len=T):
    offset = kv_len - q_len
    return [[int(rule(i + offset, j)) for j in range(kv_len)] for i in range(q_len)]


@pytest.mark.parametrize(
    "mask, rule",
    [
        (Causal(), lambda i, j: j <= i),
        (NoMask(), lambda i, j: True),
        (SlidingWindow(3), lambda i, j: i - 3 < j <= i),
        (SlidingWindow(2, causal=False), lambda i, j: abs(i - j) < 2),
        (PrefixLM(3), lambda i, j: j < 3 or j <= i),
        (KeyPadding(torch.tensor([4])), lambda i, j: j < 4),
        (Document(torch.tensor([[0, 0, 1, 1, 1, 2]])), lambda i, j: (i < 2) == (j < 2) and (i == 5) == (j == 5)),
        (
            Causal() & Document(torch.tensor([[0, 0, 1, 1, 1, 2]])),
            lambda i, j: j <= i and (i < 2) == (j < 2) and (i == 5) == (j == 5),
        ),
        (
            SlidingWindow(2) | Document(torch.tensor([[0, 0, 0, 1, 1, 1]])),
            lambda i, j: (i - 2 < j <= i) or (i < 3) == (j < 3),
        ),
    ],
    ids=lambda m: m.name if hasattr(m, "name") else "",
)
def test_pattern(mask, rule):
    assert grid(mask) == by_hand(rule)


@pytest.mark.parametrize("mask", [Causal(), SlidingWindow(2), PrefixLM(3)], ids=lambda m: m.name)
def test_queries_align_to_the_end_of_the_keys(mask):
    """With a KV cache, 2 new queries over 6 keys are rows 4 and 5 of the square mask."""
    assert grid(mask, q_len=2, kv_len=T) == grid(mask)[4:]


def test_batch_dependent_masks_differ_per_sequence():
    mask = KeyPadding(torch.tensor([2, 5]))
    assert grid(mask, batch=2, index=0)[0] == [1, 1, 0, 0, 0, 0]
    assert grid(mask, batch=2, index=1)[0] == [1, 1, 1, 1, 1, 0]


def test_names_describe_themselves():
    assert SlidingWindow(64).name == "sliding_window_64"
    assert (Causal() & SlidingWindow(8)).name == "(causal&sliding_window_8)"
    assert (Causal() & KeyPadding(torch.tensor([1]))).kinds == {"causal", "padding"}


def test_fast_path_flags():
    assert Causal().is_causal and (Causal() & NoMask()).is_causal and (Causal() & Causal()).is_causal
    assert not (Causal() & SlidingWindow(4)).is_causal and not (Causal() | PrefixLM(2)).is_causal
    assert NoMask().is_full and (NoMask() | Causal()).is_full and not Causal().is_full
    assert (
        Causal().attends_self
        and (Causal() & SlidingWindow(2)).attends_self
        and (PrefixLM(1) | KeyPadding(torch.tensor([1]))).attends_self
    )
    assert (
        not KeyPadding(torch.tensor([1])).attends_self and not (Causal() & KeyPadding(torch.tensor([1]))).attends_self
    )


def test_equal_definitions_hash_equal():
    assert SlidingWindow(4) == SlidingWindow(4) and hash(SlidingWindow(4)) == hash(SlidingWindow(4))
    assert SlidingWindow(4) != SlidingWindow(5)
    lengths = torch.tensor([3])
    assert KeyPadding(lengths) != KeyPadding(lengths)  # tensors: identity only
    dense = Causal().dense(8, 8)
    assert PrecomputedMask(Causal(), dense) == Causal() and hash(PrecomputedMask(Causal(), dense)) == hash(Causal())


def test_precomputed_mask_slices_the_buffer():
    mask = SlidingWindow(3)
    pre = PrecomputedMask(mask, mask.dense(16, 16))
    for q_len, kv_len in [(6, 6), (1, 9), (4, 16), (3, 20)]:  # the last outgrows the buffer
        assert torch.equal(pre.dense(q_len, kv_len), mask.dense(q_len, kv_len))


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: SlidingWindow(0), "mask.window=0 must be a positive integer"),
        (lambda: SlidingWindow(-2), "mask.window=-2"),
        (lambda: PrefixLM(-1), "mask.prefix_len=-1"),
        (lambda: KeyPadding(torch.tensor([1.5])), "1-D integer tensor"),
        (lambda: KeyPadding(torch.tensor([-1])), "lengths must be >= 0"),
        (lambda: Document(torch.tensor([1, 2])), "2-D integer tensor"),
        (lambda: Causal().dense(5, 3), "queries cannot outnumber keys"),
    ],
)
def test_bad_parameters_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def test_parse_mask_expressions():
    assert parse_mask("causal") == Causal()
    assert parse_mask("causal & sliding_window(window=8)") == Causal() & SlidingWindow(8)
    assert parse_mask("sliding_window(window=2) | prefix_lm(prefix_len=3)") == SlidingWindow(2) | PrefixLM(3)
    assert parse_mask("(none)") == NoMask()


@pytest.mark.parametrize(
    "expression, message",
    [
        ("causal +", "is not valid"),
        ("causal + none", "cannot read"),
        ("__import__('os')", "cannot read"),
        ("sliding(window=2)", "unknown mask strategy 'sliding'; available: (\\w+, )*causal, (\\w+, )*document, none"),
        (
            "sliding_window(size=2)",
            "mask 'sliding_window' takes \\(window: int, causal: bool = True\\), got {'size': 2}",
        ),
        ("padding", "missing a required argument: 'lengths'"),
        ("sliding_window(window=w)", "cannot read 'w'; write names and name\\(key=value\\) with literal values"),
        ("sliding_window(**x)", "cannot read 'sliding_window\\(\\*\\*x\\)'"),
        ("__import__(name='os')", "unknown mask strategy '__import__'"),
        ("sliding_window(name='os')", "mask 'sliding_window' takes \\(window: int, causal: bool = True\\), got {'na"),
        ("causal" + " & causal" * 10_000, "a mask expression is at most 256 characters, got 90006; combine fewer"),
        ("sliding_window(window=99999999999999999999)", "99999999999999999999 is out of range; integers fit in 32"),
    ],
)
def test_parse_mask_refuses(expression, message):
    with pytest.raises(ValueError, match=message):
        parse_mask(expression)


def test_mask_draws_itself(tmp_path):
    path = SlidingWindow(3).draw(tmp_path / "window.png", length=8)
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert mask_as_text(Causal(), 3) == "■··\n■■·\n■■■"
    assert mask_as_text(Causal(), 3, batch_index=2) == mask_as_text(Causal(), 3)  # the same for every sequence
    assert mask_as_text(KeyPadding(torch.tensor([3, 1])), 3, batch_index=1) == "■··\n■··\n■··"


def test_one_variadic_combinator_with_derived_flags():
    from andrea.attention.masks import Combined
    from andrea.testing.declared import mask_flags

    three = Causal() & SlidingWindow(3) & PrefixLM(2)
    assert isinstance(three, Combined) and len(three.masks) == 3  # flattened, not nested
    assert three.name == "(causal&sliding_window_3&prefix_lm_2)"
    assert (Causal() & NoMask()).is_causal and not (Causal() | SlidingWindow(2)).is_causal
    assert (SlidingWindow(2) & SlidingWindow(5)).max_lookback == 2 and (
        SlidingWindow(2) | SlidingWindow(5)
    ).max_lookback == 5
    assert (SlidingWindow(2) | PrefixLM(3)).max_lookback is None  # a prefix sees arbitrarily far back
    for mask in (three, Causal() | PrefixLM(4), SlidingWindow(2) | SlidingWindow(4), Causal() & NoMask()):
        mask_flags(mask)  # every derived flag holds for the predicate
