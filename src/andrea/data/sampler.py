"""The training sampler: each epoch's order a pure function of (seed, epoch).

Lightning calls `set_epoch` at every epoch start (DDP or not), so epoch e draws
the same indices whether the run is fresh or resumed. `num_samples` below the
dataset's length draws a new subset each epoch (text: random windows out of
every possible start); above it, indices repeat (a corpus smaller than one epoch).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class EpochSampler(Sampler[int]):
    def __init__(self, data_len: int, num_samples: int | None = None, seed: int = 0, shuffle: bool = True):
        self.data_len, self.seed, self.shuffle = data_len, seed, shuffle
        self.num_samples = data_len if num_samples is None else num_samples
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def indices(self) -> torch.Tensor:
        """This epoch's indices, (num_samples,)."""
        if not self.shuffle:
            return torch.arange(self.num_samples) % self.data_len
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        if self.num_samples > self.data_len:
            return torch.randint(self.data_len, (self.num_samples,), generator=generator)
        return torch.randperm(self.data_len, generator=generator)[: self.num_samples]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
