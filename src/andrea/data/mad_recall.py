"""MAD's recall tasks (Poli et al. 2024; docs/spec.md), generated as athms/mad-lab does, one row at a time:

- recall: `seq_len + 1` tokens of key-value slots (keys from the first half of the vocabulary, values from the
  second, keys drawn with replacement, a key's value fixed at its first appearance), the last slot a probe of a
  key seen before; the rows are the first `seq_len` tokens.
- noisy_recall: the same, each slot but one replaced by two noise tokens (from a vocabulary of their own after
  the values) with probability `frac_noise`.
- fuzzy_recall: keys and values of 1 to 3 distinct tokens (in training; the scored rows' keys are always 3
  long), a pad token (the last) filling the row's start, one key-value probe placed at random and asked again at
  the end; the rows are `seq_len` tokens, as MAD's are for this task.

Trained on the next token everywhere; scored (the validation and evaluation sets) only on the values whose key
appeared before, MAD's test rule.
"""

from __future__ import annotations

import random
from itertools import permutations
from math import perm
from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule

Rows = tuple[list[int], list[int]]  # tokens and targets, seq_len + 1 each


class _ShiftedRecall(SyntheticTaskDataModule):
    """A recall task drawn as MAD draws it, one row at a time from a Python generator seeded by torch's: rows of
    seq_len + 1 tokens, trained on the next token and scored on the recalled values (`shifted`)."""

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return self.make_split(n, generator, train=False)

    @staticmethod
    def rng(generator: torch.Generator) -> random.Random:
        return random.Random(int(torch.randint(2**62, (1,), generator=generator)))


class RecallDataModule(_ShiftedRecall):
    """In-context recall (`noise_vocab_size` and `frac_noise` make it noisy recall)."""

    name = "recall"

    def __init__(self, noise_vocab_size: int = 0, frac_noise: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if (self.seq_len + 1) % 2 or not 0 <= frac_noise < 1 or (frac_noise > 0) != (noise_vocab_size > 0):
            raise ValueError(
                f"data.seq_len={self.seq_len}, data.frac_noise={frac_noise}, data.noise_vocab_size={noise_vocab_size}"
                ": recall needs an odd seq_len (seq_len + 1 tokens of key-value slots), frac_noise in [0, 1), and "
                "noise tokens exactly when frac_noise > 0"
            )
        if self.vocab_size - noise_vocab_size < 2:
            raise ValueError(f"data.vocab_size={self.vocab_size} leaves no keys and values beside the noise")
        self.noise_vocab_size, self.frac_noise = noise_vocab_size, float(frac_noise)

    def make_split(self, n: int, generator: torch.Generator, train: bool) -> tuple[Tensor, Tensor]:
        rng = self.rng(generator)
        return shifted([self.row(rng, train) for _ in range(n)], train)

    def row(self, rng: random.Random, train: bool) -> Rows:
        plain = self.vocab_size - self.noise_vocab_size
        keys, values = range(plain // 2), range(plain // 2, plain)
        slots = (self.seq_len + 1) // 2
        kept = rng.randrange(slots - 1)  # one slot is never noise: a key to probe
        tokens: list[int] = []
        targets: list[int] = []
        seen: dict[int, int] = {}
        for i in range(slots - 1):
            if i != kept and self.frac_noise and rng.random() < self.frac_noise:
                tokens += [rng.randrange(plain, self.vocab_size) for _ in range(2)]
                targets += [IGNORE_INDEX] * 2
                continue
            key = rng.choice(keys)
            known = key in seen
            value = seen[key] if known else rng.choice(values)
            targets += [IGNORE_INDEX, value if known else IGNORE_INDEX]
            seen[key] = value
            tokens += [key, value]
        probe = rng.choice(list(seen))
        return tokens + [probe, seen[probe]], targets + [IGNORE_INDEX, seen[probe]]


class FuzzyRecallDataModule(_ShiftedRecall):
    """Fuzzy in-context recall: keys and values of up to `k_motif_size` and `v_motif_size` distinct tokens."""

    name = "fuzzy_recall"

    def __init__(self, k_motif_size: int = 3, v_motif_size: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        plain = self.vocab_size - 1  # the last token pads
        if not 1 <= k_motif_size <= plain // 2 or not 1 <= v_motif_size <= plain - plain // 2:
            raise ValueError(
                f"data.k_motif_size={k_motif_size}, data.v_motif_size={v_motif_size}: each at least 1 and at most "
                f"the keys' ({plain // 2}) and values' ({plain - plain // 2}) vocabularies"
            )
        if self.seq_len < 4 * (k_motif_size + v_motif_size):
            raise ValueError(f"data.seq_len={self.seq_len} is too short for motifs of {k_motif_size} + {v_motif_size}")
        self.k_motif_size, self.v_motif_size = k_motif_size, v_motif_size

    def footprint(self) -> tuple[int, str]:
        """The rows, and the tables of every key and value motif that make_split lists (a tuple of `size` ints
        each, about 64 + 8·size bytes): P(vocab / 2, size) of them, which grows as vocab_size ** size."""
        rows, grows = super().footprint()
        plain = self.vocab_size - 1
        halves = ((plain // 2, self.k_motif_size), (plain - plain // 2, self.v_motif_size))
        tables = sum(perm(n, size) * (64 + 8 * size) for n, largest in halves for size in range(1, largest + 1))
        return rows + tables, f"data.vocab_size={self.vocab_size}" if tables > rows else grows

    def make_split(self, n: int, generator: torch.Generator, train: bool) -> tuple[Tensor, Tensor]:
        rng, plain = self.rng(generator), self.vocab_size - 1
        key_sizes = range(1, self.k_motif_size + 1) if train else [self.k_motif_size]
        keys = {size: list(permutations(range(plain // 2), size)) for size in key_sizes}
        values = {size: list(permutations(range(plain // 2, plain), size)) for size in range(1, self.v_motif_size + 1)}
        return shifted([self.row(rng, keys, values) for _ in range(n)], train)

    def row(self, rng: random.Random, keys: dict, values: dict) -> Rows:
        probe_key = rng.choice(keys[rng.choice(list(keys))])
        probe_value = rng.choice(values[rng.choice(list(values))])
        probe_size = len(probe_key) + len(probe_value)
        probe_at, placed = rng.randrange(self.seq_len - 2 * probe_size), False
        tokens: list[int] = []
        targets: list[int] = []
        seen: dict[tuple, tuple] = {}
        while len(tokens) < self.seq_len - probe_size - (self.k_motif_size + self.v_motif_size):
            key, size = rng.choice(keys[rng.choice(list(keys))]), rng.choice(list(values))
            if len(tokens) >= probe_at and not placed:
                key, value, placed = probe_key, probe_value, True
                targets += [IGNORE_INDEX] * probe_size
            else:
                if key == probe_key:
                    value, placed = probe_value, True
                else:
                    value = seen.get(key) or rng.choice(values[size])
                targets += [IGNORE_INDEX] * len(key) + (list(value) if key in seen else [IGNORE_INDEX] * len(value))
            seen[key] = value
            tokens += [*key, *value]
        tokens += [*probe_key, *probe_value]
        targets += [IGNORE_INDEX] * len(probe_key) + list(probe_value)
        pad = self.seq_len + 1 - len(tokens)
        return [self.vocab_size - 1] * pad + tokens, [IGNORE_INDEX] * pad + targets


def shifted(rows: list[Rows], train: bool) -> tuple[Tensor, Tensor]:
    """(ids, labels) of rows of seq_len + 1 tokens: the first seq_len tokens, and the next token everywhere
    (training) or the scored targets, each at the position that predicts it."""
    tokens = torch.tensor([row[0] for row in rows], dtype=torch.long)
    targets = tokens if train else torch.tensor([row[1] for row in rows], dtype=torch.long)
    return tokens[:, :-1], targets[:, 1:]
