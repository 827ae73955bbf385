"""MAD's copying, selective copying and memorization (Poli et al. 2024; docs/spec.md), as athms/mad-lab generates
them:

- copying: `num_tokens_to_copy` content tokens (drawn with replacement from all but the last two tokens), then
  blanks (the second-to-last token) to fill the row, the copy token (the last) and as many blanks as there are
  tokens to copy; the labels at those last positions are the content tokens, in order (mad-lab's
  generate_copying_instance, not selective).
- selective_copy: `num_tokens_to_copy` content tokens (drawn with replacement from all but the last two tokens)
  with blanks (the second-to-last token) scattered among them, each blank put before a content token drawn
  uniformly (so the last content token is always last before the copy token), then the copy token (the last)
  and as many blanks as there are tokens to copy; the labels at those last positions are the content tokens,
  in order. The row is `seq_len` tokens.
- memorization: one fixed table of facts (the first half of the vocabulary but the last token, keys, mapped
  onto the second half, values, drawn once from `kv_map_seed`, the same for every row and split); each row is
  `seq_len / 2` pairs of (key, insert token) and the label at each insert token is the key's value.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule


class SelectiveCopyDataModule(SyntheticTaskDataModule):
    name = "selective_copy"

    def __init__(self, num_tokens_to_copy: int = 16, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = num_tokens_to_copy
        if not isinstance(n, int) or n < 1 or self.seq_len <= 2 * n + 1 or self.vocab_size < 3:
            raise ValueError(
                f"data.num_tokens_to_copy={n}, data.seq_len={self.seq_len}, data.vocab_size={self.vocab_size}: "
                f"{self.name} needs seq_len > 2 * num_tokens_to_copy + 1 and a vocabulary of 3 tokens or more"
            )
        self.num_tokens_to_copy = n

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        copies, copy, blank = self.num_tokens_to_copy, self.vocab_size - 1, self.vocab_size - 2
        blanks = self.seq_len - 2 * copies - 1
        content = torch.randint(self.vocab_size - 2, (n, copies), generator=generator)
        before = torch.randint(copies, (n, blanks), generator=generator)  # the content token each blank precedes
        counts = torch.zeros(n, copies, dtype=torch.long).scatter_add_(1, before, torch.ones_like(before))
        where = (counts + 1).cumsum(dim=1) - 1  # each content token's position
        ids = torch.full((n, self.seq_len), blank, dtype=torch.long).scatter_(1, where, content)
        ids[:, self.seq_len - copies - 1] = copy
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, -copies:] = content
        return ids, labels


class CopyingDataModule(SelectiveCopyDataModule):
    name = "copying"

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        copies, copy, blank = self.num_tokens_to_copy, self.vocab_size - 1, self.vocab_size - 2
        content = torch.randint(self.vocab_size - 2, (n, copies), generator=generator)
        ids = torch.full((n, self.seq_len), blank, dtype=torch.long)
        ids[:, :copies] = content
        ids[:, self.seq_len - copies - 1] = copy
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, -copies:] = content
        return ids, labels


class MemorizationDataModule(SyntheticTaskDataModule):
    name = "memorization"

    def __init__(self, kv_map_seed: int = 12345, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.seq_len % 2 or self.vocab_size < 3:
            raise ValueError(
                f"data.seq_len={self.seq_len}, data.vocab_size={self.vocab_size}: memorization needs an even "
                "seq_len (pairs of key and insert token) and a vocabulary of 3 tokens or more"
            )
        self.kv_map_seed = kv_map_seed

    def facts(self) -> Tensor:
        """The table: facts[key] is the key's value, for keys 0 .. (V - 1) // 2 - 1; the same for every row."""
        plain = self.vocab_size - 1  # the last token is the insert token
        table = torch.Generator().manual_seed(self.kv_map_seed)
        return torch.randperm(plain - plain // 2, generator=table)[: plain // 2] + plain // 2

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        facts, pairs = self.facts(), self.seq_len // 2
        keys = torch.randint(len(facts), (n, pairs), generator=generator)
        ids = torch.full((n, self.seq_len), self.vocab_size - 1, dtype=torch.long)
        ids[:, 0::2] = keys
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, 1::2] = facts[keys]
        return ids, labels
