"""Multi-query associative recall (MQAR), as Zoology generates it (Arora et al. 2023; docs/spec.md):

    k1 v1 k2 v2 ... kn vn | 0 0 k3 0 0 0 k1 0 ... 0 k2 0 ...
    the pairs                 the query region: every key once, in a random order

Keys are drawn without replacement from [1, V/2), values without replacement from [V/2, V); token 0 is the
filler (random tokens instead with `random_non_queries`). The query region after the 2n pairs' tokens has
(T - 2n) / 2 slots; each example draws its n slots without replacement with p(slot j) ∝ a·(j + 1)^(a - 1)
(a = `power_a`, 0.01: slots near the pairs favoured) and puts key i at position 2n + 2·slot_i. The label at a
query key's position is its value (the next token there); every other label is IGNORE_INDEX. Every example
has n scored positions, so the token accuracy is also the mean over examples of each one's accuracy.

Zoology also asserts vocab_size > seq_len, which nothing in its generator needs; andrea asks only what the draws
need (n distinct keys below V/2 and n distinct values above), so MQAR runs at lengths past its vocabulary
(experiment=sparse: 4,096 tokens of a vocabulary of 64).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule, distinct


class MQARDataModule(SyntheticTaskDataModule):
    name = "mqar"

    def __init__(
        self, num_kv_pairs: int = 4, power_a: float = 0.01, random_non_queries: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        T, V, n = self.seq_len, self.vocab_size, num_kv_pairs
        if not isinstance(n, int) or n < 1 or T % 2 or 2 * (n + 1) > V or 4 * n > T:
            raise ValueError(
                f"data.num_kv_pairs={n}, data.seq_len={T}, data.vocab_size={V}: MQAR needs an even seq_len, "
                "vocab_size >= 2 * (num_kv_pairs + 1) (distinct keys and values) and 4 * num_kv_pairs <= seq_len "
                "(the pairs, then a query region as long)"
            )
        if not 0 < power_a <= 1:
            raise ValueError(f"data.power_a={power_a} must be in (0, 1] (1: every query slot equally likely)")
        self.num_kv_pairs, self.power_a, self.random_non_queries = n, float(power_a), bool(random_non_queries)

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        pairs, half = self.num_kv_pairs, self.vocab_size // 2
        keys = distinct(n, half - 1, pairs, generator) + 1  # from [1, V/2)
        values = distinct(n, self.vocab_size - half, pairs, generator) + half  # from [V/2, V)
        slots = torch.multinomial(self.slot_weights().expand(n, -1), pairs, replacement=False, generator=generator)
        ids = torch.zeros(n, self.seq_len, dtype=torch.long)
        ids[:, 0 : 2 * pairs : 2], ids[:, 1 : 2 * pairs : 2] = keys, values
        where = 2 * pairs + 2 * slots  # each key's query position
        ids.scatter_(1, where, keys)
        labels = torch.full_like(ids, IGNORE_INDEX).scatter_(1, where, values)
        if self.random_non_queries:
            filler = ids == 0
            ids[filler] = torch.randint(self.vocab_size, (int(filler.sum()),), generator=generator)
        return ids, labels

    def slot_weights(self) -> Tensor:
        """p(slot j) ∝ a·(j + 1)^(a - 1) over the query region's (T - 2n) / 2 slots."""
        a, space = self.power_a, (self.seq_len - 2 * self.num_kv_pairs) // 2
        weights = a * torch.arange(1, space + 1, dtype=torch.float64) ** (a - 1)
        return weights / weights.sum()
