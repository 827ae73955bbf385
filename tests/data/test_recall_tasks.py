"""MQAR and MAD's recall tasks against their published definitions (docs/spec.md): the positions scored, the
ranges keys and values come from, distinct keys, each query's answer, and what training sees."""

from typing import Any

import pytest
import torch

from andrea.data.mad_recall import FuzzyRecallDataModule, RecallDataModule
from andrea.data.mqar import MQARDataModule
from andrea.data.tasks import IGNORE_INDEX


def rows(module, n=256, seed=0, train=False):
    return module.make_split(n, torch.Generator().manual_seed(seed), train=train)


def test_mqar_pairs_then_every_key_queried_once_its_value_the_label():
    module = MQARDataModule(vocab_size=8192, seq_len=64, num_kv_pairs=4)
    ids, labels = rows(module)
    n = 4
    keys, values = ids[:, 0 : 2 * n : 2], ids[:, 1 : 2 * n : 2]
    assert ((keys >= 1) & (keys < 4096)).all() and ((values >= 4096) & (values < 8192)).all()
    assert all(len(set(row.tolist())) == n for row in keys) and all(len(set(row.tolist())) == n for row in values)
    assert (labels[:, : 2 * n] == IGNORE_INDEX).all()  # nothing scored in the pairs
    for row_ids, row_labels, row_keys, row_values in zip(ids, labels, keys, values, strict=True):
        scored = (row_labels != IGNORE_INDEX).nonzero().flatten()
        assert len(scored) == n and ((scored - 2 * n) % 2 == 0).all()  # each at a slot: 2n + 2·slot
        answer = dict(zip(row_keys.tolist(), row_values.tolist(), strict=True))
        assert sorted(row_ids[scored].tolist()) == sorted(answer)  # every key queried once
        assert [answer[k] for k in row_ids[scored].tolist()] == row_labels[scored].tolist()
        filler = torch.ones(64, dtype=torch.bool)
        filler[: 2 * n], filler[scored] = False, False
        assert (row_ids[filler] == 0).all()  # the paper's figure: filler 0


def test_mqar_queries_favour_slots_near_the_pairs_in_a_random_order():
    module = MQARDataModule(vocab_size=512, seq_len=128, num_kv_pairs=4)
    ids, labels = rows(module, n=2000)
    slots = [((row != IGNORE_INDEX).nonzero().flatten() - 8) // 2 for row in labels]
    first = torch.stack([s.min() for s in slots]).float()
    weights = module.slot_weights()
    assert weights[0] > weights[-1] and weights.sum().item() == pytest.approx(1.0)
    assert first.mean() < (128 - 8) / 2 / 4  # the nearest query slot is near the pairs, on average
    order = [ids[i, 8 + 2 * torch.sort(s).values].tolist() for i, s in enumerate(slots[:200])]
    in_pair_order = [o == ids[i, 0:8:2].tolist() for i, o in enumerate(order)]
    assert 0.01 < sum(in_pair_order) / len(in_pair_order) < 0.2  # 1/4! = 0.04 were the order random


def test_mqar_random_filler_and_its_rules():
    ids, labels = rows(MQARDataModule(vocab_size=256, seq_len=64, num_kv_pairs=4, random_non_queries=True))
    assert (ids[labels == IGNORE_INDEX][8:] != 0).float().mean() > 0.9  # the filler is random tokens
    for bad in ({"seq_len": 63}, {"num_kv_pairs": 17}, {"vocab_size": 9}):  # 4 distinct keys and values: 10
        settings: dict[str, Any] = {"vocab_size": 256, "seq_len": 64, "num_kv_pairs": 4} | bad
        with pytest.raises(ValueError, match="MQAR needs an even seq_len"):
            MQARDataModule(**settings)


def test_recall_scores_the_values_of_keys_seen_before_and_trains_on_every_next_token():
    module = RecallDataModule(vocab_size=16, seq_len=127)
    ids, labels = rows(module)
    assert ids.shape == (256, 127) and (ids[:, 0::2] < 8).all() and (ids[:, 1::2] >= 8).all()
    for row_ids, row_labels in zip(ids.tolist(), labels.tolist(), strict=True):
        full = [*row_ids, row_labels[-1]]  # the last label is the probe's value
        seen: dict[int, int] = {}
        for t in range(0, 128, 2):
            key, value = full[t], full[t + 1]
            assert seen.setdefault(key, value) == value  # a key's value is fixed at its first appearance
            expected = value if t and key in {full[s] for s in range(0, t, 2)} else IGNORE_INDEX
            assert row_labels[t] == expected and (t + 1 >= 127 or row_labels[t + 1] == IGNORE_INDEX)
        assert row_labels[-1] != IGNORE_INDEX  # the probe is always of a key seen before
    train_ids, train_labels = rows(module, train=True)
    assert torch.equal(train_labels[:, :-1], train_ids[:, 1:])  # next token everywhere


def test_noisy_recall_puts_pairs_of_noise_tokens_that_are_never_scored():
    module = RecallDataModule(vocab_size=32, seq_len=127, noise_vocab_size=16, frac_noise=0.2)
    ids, labels = rows(module, n=512)
    noise = ids >= 16
    assert 0.15 < noise.float().mean() < 0.25 and torch.equal(noise[:, 0:126:2], noise[:, 1:127:2])
    assert (labels[noise] == IGNORE_INDEX).all() and (labels[labels != IGNORE_INDEX] >= 8).all()
    with pytest.raises(ValueError, match="noise tokens exactly when frac_noise > 0"):
        RecallDataModule(vocab_size=32, seq_len=127, frac_noise=0.2)


def test_fuzzy_recall_keys_of_three_tokens_when_scored_and_one_to_three_in_training():
    module = FuzzyRecallDataModule(vocab_size=16, seq_len=128)
    for train in (False, True):
        ids, labels = rows(module, n=64, train=train)
        assert ids.shape == (64, 128)
        for row_ids, row_labels in zip(ids.tolist(), labels.tolist(), strict=True):
            start = next(t for t, token in enumerate(row_ids) if token != 15)  # the pad fills the start
            runs = _runs([*row_ids[start:], (row_labels[-1] if not train else -1)])
            key_lengths = {len(run) for run, is_key in runs if is_key}
            assert key_lengths <= ({1, 2, 3} if train else {3})
            assert all(len(set(run)) == len(run) for run, _ in runs)  # distinct tokens within a motif
        if not train:
            scored = (labels != IGNORE_INDEX).sum(dim=1).float()
            assert (scored >= 1).all() and 1 <= scored.mean() <= 12 and (labels[labels != IGNORE_INDEX] >= 7).all()


def _runs(tokens):
    """Maximal runs of keys (0-6) and of values (7-14): (run, is_key)."""
    found: list[tuple[list[int], bool]] = []
    for token in tokens:
        if token < 0:
            continue
        is_key = token < 7
        if found and found[-1][1] == is_key:
            found[-1][0].append(token)
        else:
            found.append(([token], is_key))
    return found[:-1]  # the probe's value may be cut by the row's end
