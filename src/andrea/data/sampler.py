"""The training sampler: each epoch's order a pure function of (seed, epoch), resumable mid-epoch
and split between data-parallel processes by global batch.

Lightning calls `set_epoch` at every epoch start, so epoch e draws the same
indices whether the run is fresh or resumed. The ResumeData callback counts the
batches trained in the epoch; the data module saves (epoch, batches) in every
checkpoint (ResumableTrainData) and a resumed run's sampler starts at that
epoch and skips those batches. `num_samples` below the dataset's length draws a new subset each epoch
(text: random windows out of every possible start); above it, indices repeat.

Under DDP each global batch of world_size · batch_size indices is cut into
world_size slices, rank r taking slice r: together the processes train on the
very batches one process would with batch_size · world_size. (Lightning's own
DistributedSampler reshuffles instead, so trainers set use_distributed_sampler=false.)
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


def _rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class EpochSampler(Sampler[int]):
    def __init__(
        self, data_len: int, num_samples: int | None = None, seed: int = 0, shuffle: bool = True, batch_size: int = 1
    ) -> None:
        self.data_len, self.seed, self.shuffle, self.batch_size = data_len, seed, shuffle, batch_size
        self.num_samples = data_len if num_samples is None else num_samples
        self.epoch = 0
        self.skip_batches = 0  # batches of this epoch already trained (a resumed run); used once
        self.trained_batches = 0  # batches of this epoch trained so far (counted by ResumeData)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def indices(self) -> torch.Tensor:
        """This epoch's indices for every process, (num_samples,)."""
        if not self.shuffle:
            return torch.arange(self.num_samples) % self.data_len
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        if self.num_samples > self.data_len:
            return torch.randint(self.data_len, (self.num_samples,), generator=generator)
        return torch.randperm(self.data_len, generator=generator)[: self.num_samples]

    def __iter__(self) -> Iterator[int]:
        order = self.indices()
        rank, world = _rank_and_world()
        if world > 1:
            per_step = self.batch_size * world
            order = order[: len(order) // per_step * per_step].view(-1, world, self.batch_size)[:, rank].flatten()
        order = order[self.skip_batches * self.batch_size :]
        self.trained_batches, self.skip_batches = self.skip_batches, 0
        return iter(order.tolist())

    def __len__(self) -> int:
        rank, world = _rank_and_world()
        if world > 1:
            return self.num_samples // (self.batch_size * world) * self.batch_size
        return self.num_samples


class ResumableTrainData:
    """Mixin for a LightningDataModule whose training loader draws from an EpochSampler:
    its position goes into every checkpoint and a resumed run continues from it."""

    _train_sampler: EpochSampler | None = None
    _resume_at: dict | None = None

    def train_sampler(self, data_len: int, num_samples: int | None, seed: int, batch_size: int) -> EpochSampler:
        sampler = EpochSampler(data_len, num_samples, seed, batch_size=batch_size)
        if self._resume_at:
            epoch, done = self._resume_at["epoch"], self._resume_at["trained_batches"]
            if done >= len(sampler) // batch_size:  # saved at the end of an epoch: the next one starts
                epoch, done = epoch + 1, 0
            sampler.epoch, sampler.skip_batches = epoch, done
            self._resume_at = None
        self._train_sampler = sampler
        return sampler

    def state_dict(self) -> dict:
        s = self._train_sampler
        return {} if s is None else {"epoch": s.epoch, "trained_batches": s.trained_batches}

    def load_state_dict(self, state_dict: dict) -> None:
        self._resume_at = dict(state_dict) or None
