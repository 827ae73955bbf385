"""Selective copying, memorization, flip-flop and modular addition against their published definitions
(docs/spec.md), and the evaluation sets a task names beside its validation set."""

import pytest
import torch

from andrea.data.algorithmic import READ, WRITE, ZERO, FlipFlopDataModule, ModularAdditionDataModule
from andrea.data.mad_copy import CopyingDataModule, MemorizationDataModule, SelectiveCopyDataModule
from andrea.data.mqar import MQARDataModule
from andrea.data.tasks import IGNORE_INDEX


def rows(module, n=256, seed=0):
    return module.make_rows(n, torch.Generator().manual_seed(seed))


def test_selective_copy_labels_the_content_tokens_in_order_after_the_copy_token():
    module = SelectiveCopyDataModule(vocab_size=16, seq_len=256, num_tokens_to_copy=16)
    ids, labels = rows(module)
    assert ids.shape == (256, 256) and (ids[:, 239] == 15).all() and (ids[:, 240:] == 14).all()
    content = ids[:, :239][ids[:, :239] != 14].view(256, 16)  # 16 content tokens among 223 blanks
    assert (content < 14).all() and torch.equal(labels[:, 240:], content)
    assert (labels[:, :240] == IGNORE_INDEX).all() and (ids[:, 238] != 14).all()  # the last content token
    where = (ids[:, :239] != 14).nonzero()[:, 1].view(256, 16)  # each content token's position
    blanks_before = torch.diff(where, dim=1, prepend=torch.full((256, 1), -1)) - 1
    assert ((blanks_before.float().mean(dim=0) - 223 / 16).abs() < 2).all()  # each before a token drawn uniformly


def test_copying_puts_the_content_first_and_labels_it_in_order_after_the_copy_token():
    """mad-lab's generate_copying_instance (not selective): the content, every blank after it, the copy token."""
    ids, labels = rows(CopyingDataModule(vocab_size=16, seq_len=256, num_tokens_to_copy=16))
    assert ids.shape == (256, 256) and (ids[:, :16] < 14).all() and (ids[:, 16:239] == 14).all()
    assert (ids[:, 239] == 15).all() and (ids[:, 240:] == 14).all()
    assert torch.equal(labels[:, 240:], ids[:, :16]) and (labels[:, :240] == IGNORE_INDEX).all()
    assert len(ids[:, :16].unique()) == 14  # drawn from every content token
    with pytest.raises(ValueError, match=r"data.num_tokens_to_copy=16, data.seq_len=32.*copying needs seq_len >"):
        CopyingDataModule(vocab_size=16, seq_len=32, num_tokens_to_copy=16)


def test_memorization_one_table_for_every_row_and_split():
    module = MemorizationDataModule(vocab_size=256, seq_len=32)
    ids, labels = rows(module)
    facts = module.facts()
    assert len(facts) == 127 and len(set(facts.tolist())) == 127 and (facts >= 127).all() and (facts < 255).all()
    assert (ids[:, 1::2] == 255).all() and (ids[:, 0::2] < 127).all()
    assert torch.equal(labels[:, 1::2], facts[ids[:, 0::2]]) and (labels[:, 0::2] == IGNORE_INDEX).all()
    other_ids, other_labels = rows(MemorizationDataModule(vocab_size=256, seq_len=32, seed=5), seed=9)
    assert torch.equal(other_labels[:, 1::2], facts[other_ids[:, 0::2]])  # the same facts, whatever the seed


def test_flip_flop_scores_each_read_with_the_latest_write():
    module = FlipFlopDataModule(vocab_size=5, seq_len=64, p_ignore=0.8)
    ids, labels = rows(module, n=512)
    ops, bits = ids[:, 0::2], ids[:, 1::2] - ZERO
    assert (ops[:, 0] == WRITE).all() and (ops[:, -1] == READ).all() and ((bits == 0) | (bits == 1)).all()
    assert 0.75 < (ops[:, 1:-1] == 2).float().mean() < 0.85  # FFL(0.8)
    for row_ops, row_bits, row_labels in zip(ops.tolist(), bits.tolist(), labels[:, 0::2].tolist(), strict=True):
        last = -1
        for op, bit, label in zip(row_ops, row_bits, row_labels, strict=True):
            if op == WRITE:
                last = bit
            assert label == (last + ZERO if op == READ else IGNORE_INDEX) and (op != READ or bit == last)
    assert (labels[:, 1::2] == IGNORE_INDEX).all()  # only after a read


def test_flip_flop_evaluates_the_sparse_and_dense_tails_under_their_own_names():
    module = FlipFlopDataModule(
        vocab_size=5, seq_len=64, num_train=64, num_val=256, eval_sets={"sparse": {"p_ignore": 0.98},
        "dense": {"p_ignore": 0.1}},
    )  # fmt: skip
    module.setup()
    assert module.val_set is not None
    assert module.val_set_names == ["val", "sparse", "dense"] and len(module.val_dataloader()) == 3
    share = {name: (rows.input_ids[:, 2:-2:2] == 2).float().mean() for name, rows in module.extra_val.items()}
    assert share["sparse"] > 0.95 and share["dense"] < 0.15
    val = module.val_set.input_ids
    assert not any(torch.equal(val, rows.input_ids) for rows in module.extra_val.values())


def test_an_evaluation_set_changes_settings_and_draws_rows_of_its_own():
    module = MQARDataModule(
        vocab_size=512, seq_len=64, num_kv_pairs=4, num_train=64, num_val=32, eval_sets={"2x": {"seq_len": 128,
        "num_kv_pairs": 8}, "same": {}},
    )  # fmt: skip
    module.setup()
    assert module.train_set is not None
    long = module.extra_val["2x"]
    assert long.input_ids.shape == (32, 128) and ((long.labels != IGNORE_INDEX).sum(dim=1) == 8).all()
    same = module.extra_val["same"].input_ids
    assert not (same[:, None] == module.train_set.input_ids[None]).all(-1).any()  # never a training row
    assert module.settings()["num_kv_pairs"] == 4 and module.variant(seq_len=128).seq_len == 128
    with pytest.raises(ValueError, match=r"data\.eval_sets\.4x: .*MQAR needs"):
        MQARDataModule(vocab_size=512, seq_len=64, eval_sets={"4x": {"num_kv_pairs": 64}}).setup()
    with pytest.raises(ValueError, match=r"data\.eval_sets\.val: give each set a name"):
        MQARDataModule(vocab_size=512, seq_len=64, eval_sets={"val": {}})


def test_modular_addition_splits_every_pair_once():
    module = ModularAdditionDataModule(p=13, train_fraction=0.4)
    module.setup()
    train, val = module.train_set, module.val_set
    assert train is not None and val is not None
    assert (len(train), len(val)) == (68, 101) and module.vocab_size == 14
    pairs = {tuple(row[:2].tolist()) for row in torch.cat((train.input_ids, val.input_ids))}
    assert len(pairs) == 169 and (train.input_ids[:, 2] == 13).all()
    ids, labels = train.input_ids, train.labels
    assert torch.equal(labels[:, 2], (ids[:, 0] + ids[:, 1]) % 13) and (labels[:, :2] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match=r"data\.num_train follows from data\.p"):
        ModularAdditionDataModule(p=13, num_train=100)
    with pytest.raises(ValueError, match=r"data\.batch_size=69 is more than the 68 training pairs"):
        ModularAdditionDataModule(p=13, train_fraction=0.4, batch_size=69)
