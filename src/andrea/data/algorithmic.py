"""Flip-flop language modelling and modular addition (docs/spec.md):

- flip_flop (Liu et al. 2023): `seq_len / 2` pairs of (instruction, bit), instructions w (write), r (read) and
  i (ignore) as tokens 0, 1, 2 and the bits as tokens 3 and 4. FFL(p): each instruction is i with probability
  `p_ignore`, else w or r alike; the first is always w (so a read has a write to recall) and the last always r.
  Only the bit after a read is determined, the bit of the latest write: the label at each r is that bit,
  every other label IGNORE_INDEX. Trained at FFL(0.8); `eval_sets` add the sparse FFL(0.98) and dense FFL(0.1).
- modular_addition (Power et al. 2022): rows [a, b, =] for a, b in [0, p), `=` the token p; the label at `=`
  is (a + b) mod p. All p² pairs, shuffled once by the seed, the first `train_fraction` of them the training
  rows and the rest the validation rows (num_train and num_val follow from p and the fraction).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule

WRITE, READ, IGNORE, ZERO = 0, 1, 2, 3  # flip-flop's tokens; the bits are ZERO and ZERO + 1


class FlipFlopDataModule(SyntheticTaskDataModule):
    name = "flip_flop"

    def __init__(self, p_ignore: float = 0.8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.seq_len % 2 or self.seq_len < 4 or self.vocab_size != 5 or not 0 <= p_ignore < 1:
            raise ValueError(
                f"data.seq_len={self.seq_len}, data.vocab_size={self.vocab_size}, data.p_ignore={p_ignore}: "
                "flip-flop needs an even seq_len of 4 or more, vocab_size 5 (w, r, i, 0, 1) and p_ignore in [0, 1)"
            )
        self.p_ignore = float(p_ignore)

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        pairs = self.seq_len // 2
        draw = torch.rand(n, pairs, generator=generator)
        half = (1 - self.p_ignore) / 2
        ops = torch.where(draw < half, WRITE, torch.where(draw < 2 * half, READ, IGNORE))
        ops[:, 0], ops[:, -1] = WRITE, READ
        bits = torch.randint(2, (n, pairs), generator=generator)
        written = torch.where(ops == WRITE, torch.arange(pairs), -1).cummax(dim=1).values  # the latest write
        recalled = bits.gather(1, written)
        bits = torch.where(ops == READ, recalled, bits)
        ids = torch.stack((ops, bits + ZERO), dim=2).flatten(1)
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, 0::2] = torch.where(ops == READ, recalled + ZERO, IGNORE_INDEX)
        return ids, labels


class ModularAdditionDataModule(SyntheticTaskDataModule):
    name = "modular_addition"

    def __init__(self, p: int = 59, train_fraction: float = 0.5, **kwargs: Any) -> None:
        kwargs = {"vocab_size": p + 1, "seq_len": 3, "num_train": 1, "num_val": 1} | kwargs
        super().__init__(**kwargs)
        if not isinstance(p, int) or p < 2 or self.vocab_size != p + 1 or self.seq_len != 3:
            raise ValueError(
                f"data.p={p}, data.vocab_size={self.vocab_size}, data.seq_len={self.seq_len}: modular addition "
                "needs p >= 2, vocab_size p + 1 (the numbers and '=') and seq_len 3 ([a, b, =])"
            )
        if not 0 < train_fraction < 1 or round(train_fraction * p * p) in (0, p * p):
            raise ValueError(f"data.train_fraction={train_fraction} must leave pairs to train on and to validate on")
        split = {"num_train": round(train_fraction * p * p), "num_val": p * p - round(train_fraction * p * p)}
        for key, rows in split.items():
            if kwargs[key] not in (1, rows):  # 1: not given
                raise ValueError(f"data.{key} follows from data.p and data.train_fraction ({rows}); drop it")
        self.p, self.train_fraction = p, float(train_fraction)
        self.num_train, self.num_val = split["num_train"], split["num_val"]
        if self.batch_size > self.num_train:
            raise ValueError(
                f"data.batch_size={self.batch_size} is more than the {self.num_train} training pairs (data.p={p}, "
                f"data.train_fraction={train_fraction}): not one full batch to train on; lower data.batch_size"
            )

    def footprint(self) -> tuple[int, str]:
        """Every one of the p² pairs is made, and its order (p² indices) with it."""
        rows, _ = super().footprint()
        return rows + 8 * self.p * self.p, f"data.p={self.p}"

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """The first n of every pair shuffled (n = p²: the two splits, disjoint and together every pair)."""
        order = torch.randperm(self.p * self.p, generator=generator)
        a, b = order // self.p, order % self.p
        ids = torch.stack((a, b, torch.full_like(a, self.p)), dim=1)
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, 2] = (a + b) % self.p
        return ids[:n], labels[:n]
