"""Tasks that need state tracking: the answer at every position is a state updated by every token so far, so a
model must carry it, not look it up (Merrill et al. 2024, "The illusion of state in state-space models"; Grazzi
et al. 2025, "Unlocking state-tracking in linear RNNs through negative eigenvalues"). Each row is `seq_len`
tokens drawn uniformly; the label at t is the state after token t, scored at every position. Evaluation sets of
longer rows (`data.eval_sets={len_2x: {seq_len: ...}}`, the presets' 2x and 4x) test the state past the lengths
trained on.

- parity: bits 0 and 1; the label at t is the parity of the bits up to t (0 or 1).
- modular_counting: bits 0 and 1; the label at t is the number of ones up to t modulo `modulus` (3 by
  default). The ids are 0 .. modulus - 1 (the inputs only 0 and 1), so vocab_size is max(2, modulus).
- word_problem: the word problem of a permutation group (`group`: S3, A5 or S5; Merrill et al.;
  andrea.data.groups): each token one of the group's elements, the label at t the product g_1 g_2 ... g_t. S3
  is solvable and small; A5 and S5 are not solvable (no constant-depth circuit of the kind a transformer is
  computes their word problem, under the usual conjecture).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.groups import GROUPS, group_order, products
from andrea.data.tasks import SyntheticTaskDataModule
from andrea.utils.rules import Rule, one_of


class ParityDataModule(SyntheticTaskDataModule):
    name = "parity"

    def __init__(self, **kwargs: Any) -> None:
        kwargs = {"vocab_size": 2} | kwargs
        super().__init__(**kwargs)
        if self.vocab_size != 2:
            raise ValueError(f"data.vocab_size={self.vocab_size}: parity's tokens are the bits 0 and 1; set it to 2")

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        bits = torch.randint(2, (n, self.seq_len), generator=generator)
        return bits, bits.cumsum(dim=1) % 2


class ModularCountingDataModule(SyntheticTaskDataModule):
    name = "modular_counting"

    def __init__(self, modulus: int = 3, **kwargs: Any) -> None:
        kwargs = {"vocab_size": max(2, modulus)} | kwargs
        super().__init__(**kwargs)
        if modulus < 2 or self.vocab_size != max(2, modulus):
            raise ValueError(
                f"data.modulus={modulus}, data.vocab_size={self.vocab_size}: count modulo 2 or more, with vocab_size "
                f"max(2, modulus) (the bits in, the counts out)"
            )
        self.modulus = modulus

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        bits = torch.randint(2, (n, self.seq_len), generator=generator)
        return bits, bits.cumsum(dim=1) % self.modulus


class WordProblemDataModule(SyntheticTaskDataModule):
    name = "word_problem"

    @classmethod
    def setting_rules(cls) -> dict[str, Rule]:
        return super().setting_rules() | {"group": one_of(*GROUPS)}

    def __init__(self, group: str = "S3", **kwargs: Any) -> None:
        order = group_order(group)
        kwargs = {"vocab_size": order} | kwargs
        super().__init__(**kwargs)
        if self.vocab_size != order:
            raise ValueError(
                f"data.vocab_size={self.vocab_size}: the word problem of {group} has one token an element; set it "
                f"to the group's order, {order}"
            )
        self.group = group

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        ids = torch.randint(self.vocab_size, (n, self.seq_len), generator=generator)
        table, state, labels = torch.tensor(products(self.group)), ids[:, 0], torch.empty_like(ids)
        labels[:, 0] = state
        for t in range(1, self.seq_len):
            state = table[state, ids[:, t]]
            labels[:, t] = state
        return ids, labels
