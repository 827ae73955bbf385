"""The state-tracking tasks (andrea.data.state_tracking, andrea.data.groups) against their definitions, worked
out here one token at a time in plain Python; their configs, evaluation sets and refusals."""

from __future__ import annotations

import itertools

import pytest
import torch

from andrea.data.groups import elements, group_order, products
from andrea.data.state_tracking import ModularCountingDataModule, ParityDataModule, WordProblemDataModule
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train


def rows(module, n=32, seed=0):
    return module.make_rows(n, torch.Generator().manual_seed(seed))


def running(ids, step, start):
    """Each row's states after each token, one token at a time."""
    out = []
    for row in ids.tolist():
        state, states = start, []
        for token in row:
            state = step(state, token)
            states.append(state)
        out.append(states)
    return torch.tensor(out)


def test_parity_labels_every_prefix():
    ids, labels = rows(ParityDataModule(seq_len=40))
    assert set(ids.unique().tolist()) == {0, 1}
    assert torch.equal(labels, running(ids, lambda s, b: s ^ b, 0))


@pytest.mark.parametrize("modulus", [2, 3, 5])
def test_modular_counting_counts_the_ones_modulo_m(modulus):
    ids, labels = rows(ModularCountingDataModule(modulus=modulus, seq_len=40))
    assert torch.equal(labels, running(ids, lambda s, b: (s + b) % modulus, 0))
    assert labels.max() == modulus - 1


@pytest.mark.parametrize(("group", "order"), [("S3", 6), ("A5", 60), ("S5", 120)])
def test_each_group_is_the_group_it_names(group, order):
    """Its elements are distinct permutations, closed under the product, with the identity and inverses;
    the product is associative (every triple, for S3)."""
    members, table = elements(group), products(group)
    assert group_order(group) == order == len(set(members))
    identity = members.index(tuple(range(len(members[0]))))
    assert all(table[identity][a] == table[a][identity] == a for a in range(order))
    assert all(identity in table[a] for a in range(order))
    triples = itertools.product(range(order), repeat=3) if order < 10 else [(1, 7, 30), (59, 2, 11), (5, 5, 5)]
    assert all(table[table[a][b]][c] == table[a][table[b][c]] for a, b, c in triples)


def test_the_word_problem_labels_the_product_so_far():
    module = WordProblemDataModule(group="S3", seq_len=30)
    ids, labels = rows(module)
    members = elements("S3")

    def times(a, b):  # a then b as functions: (a b)(i) = a(b(i))
        return members.index(tuple(members[a][i] for i in members[b]))

    expected = [[row[0]] for row in ids.tolist()]
    for r, row in enumerate(ids.tolist()):
        for token in row[1:]:
            expected[r].append(times(expected[r][-1], token))
    assert torch.equal(labels, torch.tensor(expected))


@pytest.mark.parametrize("task", ["parity", "modular_counting", "word_problem"])
def test_each_task_trains_with_its_longer_evaluation_sets(tmp_path, task):
    overrides = [*QUICK, f"data={task}", "trainer.max_steps=2"]  # the context grows to the 4x set by itself
    result = train(compose_train(tmp_path, [*overrides, "~callbacks.attention_maps"]))
    assert result.status == "completed"
    assert {"len_2x", "len_4x"} <= set(result.eval_sets or {})


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["data=word_problem", "data.group=Z7"], "data.group='Z7' is not one of S3, A5, S5"),
        (["data=modular_counting", "data.modulus=1", "data.vocab_size=2"], "data.modulus=1"),
        (["data=parity", "data.vocab_size=3"], "data.vocab_size=3"),
    ],
)
def test_a_task_setting_it_cannot_take_is_refused_in_one_line(tmp_path, overrides, words):
    with pytest.raises(Exception, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")) as error:
        train(compose_train(tmp_path, [*QUICK, *overrides]))
    assert "\n" not in str(error.value)
