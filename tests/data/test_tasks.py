"""The synthetic tasks: their rows, labels, seeding and split."""

from typing import Any

import pytest
import torch

from andrea.data import IGNORE_INDEX, InductionDataModule, LookbackDataModule, RepetitionDataModule


def rows(module):
    module.setup()
    return module.train_set.input_ids, module.train_set.labels


def test_repetition_rows_repeat_one_id():
    ids, labels = rows(RepetitionDataModule(num_train=100, num_val=10))
    assert ids.shape == labels.shape == (100, 32)
    assert (ids == ids[:, :1]).all() and (labels == ids).all()  # the next id is the same id
    assert ids.max() < 64 and len(ids[:, 0].unique()) > 30


def test_lookback_labels_are_k_back():
    ids, labels = rows(LookbackDataModule(k=3, num_train=50, num_val=10))
    assert (labels[:, :3] == IGNORE_INDEX).all()
    assert torch.equal(labels[:, 3:], ids[:, :-3])


def test_induction_rows_are_periodic_with_distinct_blocks():
    module = InductionDataModule(min_period=5, max_period=9, num_train=200, num_val=10)
    ids, labels = rows(module)
    for row, label in zip(ids, labels, strict=True):
        period = int((label == IGNORE_INDEX).sum())  # nothing is scored before the block repeats
        assert 5 <= period <= 9
        assert len(row[:period].unique()) == period  # distinct ids inside a block
        assert torch.equal(row[period:], row[: 32 - period])  # then the block again
        assert torch.equal(label[period:-1], row[period + 1 :])  # the label is the next id


def test_induction_can_score_every_token_as_a_language_model_does():
    settings = dict(min_period=5, max_period=9, num_train=200, num_val=10)
    ids, labels = rows(InductionDataModule(score_every_token=True, **settings))
    assert torch.equal(ids, rows(InductionDataModule(**settings))[0])  # the same rows
    assert (labels != IGNORE_INDEX).all()
    assert torch.equal(labels[:, :-1], ids[:, 1:])  # every position's label is the next id, the first block's too


def test_seeded_and_split():
    a, b = (
        RepetitionDataModule(seed=1, num_train=64, num_val=16),
        RepetitionDataModule(seed=1, num_train=64, num_val=16),
    )
    assert torch.equal(rows(a)[0], rows(b)[0])
    assert not torch.equal(rows(a)[0], rows(RepetitionDataModule(seed=2, num_train=64, num_val=16))[0])
    assert len(a.val_set) == 16 and len(a.train_set) == 64
    batch = next(iter(a.train_dataloader()))
    assert batch["input_ids"].shape == (64, 32) and batch["labels"].shape == (64, 32)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: LookbackDataModule(k=0), "data.k=0 must be an integer in \\[1, data.seq_len - 1 = 31\\]"),
        (lambda: InductionDataModule(min_period=1), "need 2 <= min_period"),
        (lambda: InductionDataModule(max_period=70, seq_len=200), "max_period <= data.vocab_size=64"),
        (lambda: RepetitionDataModule(vocab_size=0), "data.vocab_size=0 must be a positive integer"),
    ],
)
def test_bad_task_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_copy_rows_are_a_string_its_separator_and_the_string_again():
    from andrea.data.copying import CopyDataModule, string_correct

    module = CopyDataModule(vocab_size=30, seq_len=35, min_length=4, max_length=16, num_train=300, num_val=10)
    ids, labels = rows(module)
    lengths = set()
    for row, label in zip(ids, labels, strict=True):
        n = int((row == 27).nonzero()[0])  # the separator | follows the string at 1 .. n - 1
        lengths.add(n - 1)
        assert row[0] == 26 and row[2 * n] == 28 and (row[2 * n + 1 :] == 29).all()  # $ first; . then * after
        assert torch.equal(row[1:n], row[n + 1 : 2 * n]) and (row[1:n] < 26).all()  # the copy, of letters
        assert torch.equal(label[n : 2 * n], row[n + 1 : 2 * n + 1])  # scored: the copy and its EOS, next ids
        assert (label[:n] == IGNORE_INDEX).all() and (label[2 * n :] == IGNORE_INDEX).all()
    assert lengths == set(range(4, 17))  # every length of [min_length, max_length] drawn
    right = torch.nn.functional.one_hot(labels.clamp(min=0), 30).float()
    assert string_correct(right, labels).all()
    eos = int((labels[0] != IGNORE_INDEX).nonzero()[-1])
    right[0, eos] = torch.nn.functional.one_hot(torch.tensor(29), 30)  # row 0's EOS read as padding
    assert string_correct(right, labels).tolist() == [False] + [True] * (len(labels) - 1)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"seq_len": 34}, "needs seq_len >= 2 * max_length + 3 = 35"),
        ({"min_length": 5, "max_length": 4}, "give string lengths 1 <= min_length <= max_length"),
        ({"max_length": True}, "data.max_length=True"),
    ],
)
def test_copy_refuses_what_it_cannot_make_in_one_line(settings, refusal):
    from andrea.data.copying import CopyDataModule

    with pytest.raises(ValueError, match=None) as refused:
        CopyDataModule(**{"vocab_size": 30, "seq_len": 35, "min_length": 4, "max_length": 16} | settings)
    assert refusal in str(refused.value) and "\n" not in str(refused.value)


def test_a_training_mixture_trains_on_each_part_and_validates_on_the_task_s_own_settings():
    from andrea.data.mqar import MQARDataModule

    settings: dict[str, Any] = dict(vocab_size=128, seq_len=32, num_kv_pairs=4, num_train=300, num_val=20)
    mix = {"pairs_2": {"num_kv_pairs": 2, "seq_len": 16}, "pairs_8": {"num_kv_pairs": 8, "num_train": 100}}
    module = MQARDataModule(**settings, train_mix=mix)
    ids, labels = rows(module)
    scored = (labels != IGNORE_INDEX).sum(dim=1)
    assert ids.shape == (150 + 100, 32)  # pairs_2 an equal share of 300 between 2 parts, pairs_8 its own 100
    assert sorted(scored.unique().tolist()) == [2, 8] and int((scored == 2).sum()) == 150
    short = scored == 2
    assert (ids[short, 16:] == 0).all() and (labels[short, 16:] == IGNORE_INDEX).all()  # padded past its 16
    assert module.val_set is not None and ((module.val_set.labels != IGNORE_INDEX).sum(dim=1) == 4).all()
    assert torch.equal(rows(MQARDataModule(**settings, train_mix=mix))[0], ids)  # seeded
    assert module.footprint()[0] == 2 * 16 * (250 + 20) * 32


@pytest.mark.parametrize(
    ("mix", "refusal"),
    [
        ({"long": {"seq_len": 64}}, "data.train_mix.long.seq_len=64 is longer than data.seq_len=32"),
        ({"big": {"num_kv_pairs": 9}}, "data.train_mix.big: data.num_kv_pairs=9"),
        ({"odd": {"pairs": 2}}, "data.train_mix.odd.pairs is not a setting of task mqar"),
        ({"val": {"num_kv_pairs": 2}}, "data.train_mix.val: give each set a name"),
    ],
)
def test_a_training_mixture_s_bad_part_is_refused_in_one_line(mix, refusal):
    from andrea.data.mqar import MQARDataModule

    with pytest.raises(ValueError) as refused:
        MQARDataModule(vocab_size=128, seq_len=32, num_kv_pairs=4, train_mix=mix)
    assert refusal in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
