"""Copying (Jelassi et al. 2024, "Repeat after me"), as their synthetic experiments write it:

    $ x1 x2 ... xL | x1 x2 ... xL . * * ...
    BOS  the string  SEP  the copy   EOS  padding to seq_len

The string's L letters are drawn uniformly, with replacement, from the alphabet (ids 0 .. vocab_size - 5), its
length uniformly from [min_length, max_length] for each row; the four ids after the alphabet are $, |, . and *.
The labels are the copy and its EOS (the next token at the separator and at each copied letter), IGNORE_INDEX
elsewhere: a row is copied right when all L + 1 of them are (`string_correct`), the string accuracy Jelassi et al.
report. Evaluation sets of longer strings (`data.eval_sets={long: {min_length: 64, max_length: 64, seq_len: 131}}`)
test copying beyond the lengths trained on.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule

SPECIALS = 4  # $ (BOS), | (separator), . (EOS), * (padding), after the alphabet


class CopyDataModule(SyntheticTaskDataModule):
    name = "copy"

    def __init__(self, min_length: int = 4, max_length: int = 16, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(min_length, int) or not isinstance(max_length, int) or not 1 <= min_length <= max_length:
            raise ValueError(
                f"data.min_length={min_length!r}, data.max_length={max_length!r}: give string lengths "
                "1 <= min_length <= max_length"
            )
        if self.seq_len < 2 * max_length + 3 or self.vocab_size < SPECIALS + 2:
            raise ValueError(
                f"data.seq_len={self.seq_len}, data.vocab_size={self.vocab_size}: copying a string of "
                f"data.max_length={max_length} needs seq_len >= 2 * max_length + 3 = {2 * max_length + 3} and a "
                f"vocabulary of an alphabet of 2 or more and the {SPECIALS} special tokens"
            )
        self.min_length, self.max_length = min_length, max_length

    @property
    def alphabet(self) -> int:
        return self.vocab_size - SPECIALS

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        A, T = self.alphabet, self.seq_len
        bos, sep, eos, pad = A, A + 1, A + 2, A + 3
        lengths = torch.randint(self.min_length, self.max_length + 1, (n, 1), generator=generator)
        letters = torch.randint(A, (n, self.max_length), generator=generator)
        at = torch.arange(T).expand(n, T)
        # the string at 1 .. L, the separator at L + 1, the copy at L + 2 .. 2L + 1, the EOS at 2L + 2
        first = letters.gather(1, (at - 1).clamp(0, self.max_length - 1))
        second = letters.gather(1, (at - lengths - 2).clamp(0, self.max_length - 1))
        ids = torch.full((n, T), pad, dtype=torch.long)
        ids = torch.where((at >= 1) & (at <= lengths), first, ids)
        ids = torch.where((at >= lengths + 2) & (at <= 2 * lengths + 1), second, ids)
        ids[:, 0] = bos
        ids = torch.where(at == lengths + 1, sep, ids)
        ids = torch.where(at == 2 * lengths + 2, eos, ids)
        scored = (at >= lengths + 1) & (at <= 2 * lengths + 1)  # the separator and the copy predict the next
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, :-1] = torch.where(scored[:, :-1], ids[:, 1:], IGNORE_INDEX)
        return ids, labels


def string_correct(logits: Tensor, labels: Tensor) -> Tensor:
    """(B, T, V) logits and (B, T) labels -> (B,) whether every scored position of each row is predicted right
    (each prediction from the true prefix; for a copy that is right throughout, the greedy copy itself)."""
    scored = labels != IGNORE_INDEX
    wrong = (logits.argmax(dim=-1) != labels) & scored
    return ~wrong.any(dim=-1)
