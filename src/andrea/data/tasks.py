"""Synthetic tasks whose answer is known, so what the heads learn can be checked.

Every task makes rows of `seq_len` input ids and `seq_len` labels (IGNORE_INDEX
where nothing can be predicted), seeded and split into train and validation. A task
may draw its training rows otherwise than the rows it is scored on (`make_split`: MAD's
recall trains on the next token everywhere and scores only the recalled values), and may name
evaluation sets beside its validation set (`eval_sets`: {name: the settings that
differ}, e.g. twice the length; a batch_size among them sets its loader's, for a long set), each validated and
logged under its own name.

- repetition (docs/spec.md §5): each row is one random id repeated; the label is the
  next id. The current token alone predicts the next, so attention is NOT
  needed (train `model.net.attention=null` to see it learn as fast).
- lookback(k): random ids; the label at t is the id k positions back. Only
  attention can fetch it; the oracle head attends from t to t - k.
- induction: a random block of distinct ids, repeated to fill the row, with a
  period drawn per row; the label is the next id, scored once the current id
  has occurred before. The oracle head attends to the token after the previous
  occurrence of the current token (t - period + 1), which needs two layers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import Tensor
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from andrea.data.sampler import ResumableTrainData
from andrea.data.task_settings import eval_sets_of, task_rules, typed_constructor
from andrea.utils.rules import Rule
from andrea.utils.typed_settings import setting_names

IGNORE_INDEX = -100
TOKEN_BYTES = 2 * 8  # a row's token: its input id and its label, int64 each


@dataclass(frozen=True)
class Pattern:
    """What a task's answer needs from attention: a head of `role` in a layer >= `min_layer`,
    or (role None) no attention at all."""

    what: str
    role: str | None = None
    min_layer: int = 0


class TokenRows(Dataset):
    def __init__(self, input_ids: Tensor, labels: Tensor) -> None:
        self.input_ids, self.labels = input_ids, labels

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


class SyntheticTaskDataModule(ResumableTrainData, L.LightningDataModule):
    """Base of the synthetic tasks: subclasses write `make_rows` and declare the attention their answer needs."""

    name = "synthetic"
    attention_pattern: Pattern | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in vars(cls):
            cls.__init__ = typed_constructor(vars(cls)["__init__"])  # type: ignore[method-assign]

    @classmethod
    def setting_rules(cls) -> dict[str, Rule]:
        """Each setting's rule: DATA's for the sizes, else its annotation's in the task's constructors."""
        return task_rules(cls)

    def footprint(self) -> tuple[int, str]:
        """(bytes, the setting that grows them) of the rows `setup` makes: the splits and every evaluation set,
        counted twice (the rows are made whole, then split)."""
        train = sum(int(part["num_train"]) for part in self._mixture_parts().values()) or self.num_train
        rows = (train + self.num_val) * self.seq_len + sum(
            int(changes.get("num_val", self.num_val)) * int(changes.get("seq_len", self.seq_len))
            for changes in self.eval_sets.values()
        )
        return 2 * TOKEN_BYTES * rows, f"data.num_train={self.num_train}"

    def __init__(
        self,
        vocab_size: int = 64,
        seq_len: int = 32,
        num_train: int = 4096,
        num_val: int = 512,
        batch_size: int = 64,
        seed: int = 0,
        num_workers: int = 0,
        eval_sets: Mapping[str, Mapping[str, Any]] | None = None,
        train_mix: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()  # its settings checked by DATA's rules before this body runs (typed_constructor)
        self.vocab_size, self.seq_len = vocab_size, seq_len
        self.num_train, self.num_val, self.batch_size = num_train, num_val, batch_size
        self.seed, self.num_workers = seed, num_workers
        self.eval_sets = eval_sets_of(eval_sets, "eval_sets")
        self.train_mix = eval_sets_of(train_mix, "train_mix")
        self.train_set: TokenRows | None = None
        self.val_set: TokenRows | None = None
        self.extra_val: dict[str, TokenRows] = {}  # the evaluation sets' rows, by name

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """(n, seq_len) input ids and (n, seq_len) labels."""
        raise NotImplementedError

    def make_split(self, n: int, generator: torch.Generator, train: bool) -> tuple[Tensor, Tensor]:
        """Rows of one split, for a task whose training rows differ from its scored ones (by default
        `make_rows`; then the two splits are cut from one call, as they always were)."""
        return self.make_rows(n, generator)

    def settings(self) -> dict[str, Any]:
        """Every argument the module was built with, by name (each kept under its own name)."""
        return {name: getattr(self, name) for name in sorted(setting_names(type(self)))}

    def check_eval_sets(self) -> None:
        """Each evaluation set and each part of the training mixture built as the task it makes (with its own
        checks), so that a bad one is refused with the task, before any work; a key the task does not have is
        named, and a part of the mixture longer than the rows it joins."""
        for key, sets in (("eval_sets", self.eval_sets), ("train_mix", self.train_mix)):
            for name, changes in sets.items():
                unknown = sorted(set(changes) - (set(setting_names(type(self))) - {"eval_sets", "train_mix"}))
                if unknown:
                    raise ValueError(
                        f"data.{key}.{name}.{unknown[0]} is not a setting of task {self.name}; give settings of the "
                        f"task that differ, e.g. data.{key}={{long: {{seq_len: 128}}}}"
                    )
                try:
                    part = self.variant(**changes)
                except (ValueError, TypeError) as error:
                    raise ValueError(f"data.{key}.{name}: {str(error).splitlines()[0]}") from None
                if key == "train_mix" and part.seq_len > self.seq_len:
                    raise ValueError(
                        f"data.train_mix.{name}.seq_len={part.seq_len} is longer than data.seq_len={self.seq_len}, "
                        "the rows it joins; give a seq_len up to it (shorter rows are padded)"
                    )

    def variant(self, **changes: Any) -> SyntheticTaskDataModule:
        """The same task with some settings changed, checked as the task checks its own (no evaluation sets, no
        training mixture)."""
        return type(self)(**(self.settings() | {"eval_sets": None, "train_mix": None} | changes))

    @property
    def val_set_names(self) -> list[str]:
        """The validation sets in the order val_dataloader returns them: `val`, then each evaluation set."""
        return ["val", *self.eval_sets]

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            generator = torch.Generator().manual_seed(self.seed)
            if self.train_mix:  # the mixture to train on; validated on the task's own settings
                self.train_set = self._mixture_rows()
                self.val_set = TokenRows(*self.make_split(self.num_val, generator, train=False))
            elif type(self).make_split is SyntheticTaskDataModule.make_split:
                input_ids, labels = self.make_rows(self.num_train + self.num_val, generator)
                n = self.num_train
                self.train_set = TokenRows(input_ids[:n], labels[:n])
                self.val_set = TokenRows(input_ids[n:], labels[n:])
            else:
                self.train_set = TokenRows(*self.make_split(self.num_train, generator, train=True))
                self.val_set = TokenRows(*self.make_split(self.num_val, generator, train=False))
            self.extra_val = {name: self._eval_rows(name, changes) for name, changes in self.eval_sets.items()}

    def _mixture_parts(self) -> dict[str, dict[str, Any]]:
        """Each part of the training mixture's settings, its num_train an equal share of the task's unless given."""
        share = {"num_train": max(1, self.num_train // max(1, len(self.train_mix)))}
        return {name: share | changes for name, changes in self.train_mix.items()}

    def _mixture_rows(self) -> TokenRows:
        """The training rows of the mixture (`train_mix`): each part's num_train rows (its own setting, else an
        equal share of the task's), each from a generator of its own, padded to seq_len with token 0 and no
        label, then shuffled together by the seed."""
        parts = []
        for name, changes in self._mixture_parts().items():
            part = self.variant(**changes)
            seed = int.from_bytes(hashlib.sha256(f"{self.seed}:train_mix:{name}".encode()).digest()[:7], "big")
            ids, labels = part.make_split(part.num_train, torch.Generator().manual_seed(seed), train=True)
            pad = self.seq_len - ids.shape[1]
            parts.append((F.pad(ids, (0, pad), value=0), F.pad(labels, (0, pad), value=IGNORE_INDEX)))
        ids, labels = (torch.cat(columns) for columns in zip(*parts, strict=True))
        order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(self.seed))
        return TokenRows(ids[order], labels[order])

    def _eval_rows(self, name: str, changes: dict[str, Any]) -> TokenRows:
        """An evaluation set's rows, from a generator of its own (never the training rows' draws)."""
        try:
            other = self.variant(**changes)
        except (ValueError, TypeError) as error:
            raise ValueError(f"data.eval_sets.{name}: {error}") from None
        seed = int.from_bytes(hashlib.sha256(f"{self.seed}:{name}".encode()).digest()[:7], "big")
        return TokenRows(*other.make_split(other.num_val, torch.Generator().manual_seed(seed), train=False))

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None  # setup() comes first
        sampler = self.train_sampler(len(self.train_set), None, self.seed, self.batch_size)  # a fresh order every epoch
        return DataLoader(
            self.train_set, self.batch_size, sampler=sampler, num_workers=self.num_workers, drop_last=True
        )

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The validation set's loader; with evaluation sets, one loader per set in `val_set_names`' order."""
        assert self.val_set is not None  # setup() comes first
        sets = [self.val_set, *self.extra_val.values()]
        sizes = [
            self.batch_size,
            *(int(changes.get("batch_size", self.batch_size)) for changes in self.eval_sets.values()),
        ]
        loaders = [
            DataLoader(rows, batch_size=size, num_workers=self.num_workers)
            for rows, size in zip(sets, sizes, strict=True)
        ]
        return loaders if self.eval_sets else loaders[0]

    def probe_batch(self, n: int = 4) -> dict[str, Tensor]:
        """A few fixed validation rows, for attention maps and head-role metrics."""
        self.setup()
        assert self.val_set is not None  # made by setup()
        return {"input_ids": self.val_set.input_ids[:n], "labels": self.val_set.labels[:n]}


SyntheticTaskDataModule.__init__ = typed_constructor(SyntheticTaskDataModule.__init__)  # type: ignore[method-assign]


def distinct(n: int, choices: int, k: int, generator: torch.Generator) -> Tensor:
    """(n, k) draws without replacement from range(choices), each row its own (a random permutation's prefix)."""
    return torch.rand(n, choices, generator=generator).argsort(dim=-1)[:, :k]


class RepetitionDataModule(SyntheticTaskDataModule):
    name = "repetition"
    attention_pattern = Pattern("the current token alone predicts the next")

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        ids = torch.randint(self.vocab_size, (n, 1), generator=generator).expand(n, self.seq_len + 1)
        return ids[:, :-1].clone(), ids[:, 1:].clone()  # labels: the next id


class LookbackDataModule(SyntheticTaskDataModule):
    name = "lookback"

    def __init__(self, k: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(k, int) or not 0 < k < self.seq_len:
            raise ValueError(f"data.k={k!r} must be an integer in [1, data.seq_len - 1 = {self.seq_len - 1}]")
        self.k = k
        role = "previous_token" if k == 1 else f"lookback_{k}"
        self.attention_pattern = Pattern(f"a head attending {k} back", role)

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        ids = torch.randint(self.vocab_size, (n, self.seq_len), generator=generator)
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, self.k :] = ids[:, : -self.k]  # label at t: the id at t - k
        return ids, labels


class InductionDataModule(SyntheticTaskDataModule):
    name = "induction"
    attention_pattern = Pattern("an induction head in a layer >= 1", "induction", min_layer=1)

    def __init__(
        self, min_period: int = 6, max_period: int = 12, score_every_token: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if not 2 <= min_period <= max_period or 2 * max_period > self.seq_len or max_period > self.vocab_size:
            raise ValueError(
                f"data.min_period={min_period}, data.max_period={max_period}: need 2 <= min_period <= max_period, "
                f"2 * max_period <= data.seq_len={self.seq_len} and max_period <= data.vocab_size={self.vocab_size}"
            )
        self.min_period, self.max_period, self.score_every_token = min_period, max_period, score_every_token

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        periods = torch.randint(self.min_period, self.max_period + 1, (n, 1), generator=generator)
        # distinct ids per block (a random permutation's prefix), so a previous occurrence is unique
        blocks = distinct(n, self.vocab_size, self.vocab_size, generator)
        positions = torch.arange(self.seq_len + 1).unsqueeze(0) % periods  # (n, seq_len + 1)
        ids = blocks.gather(1, positions)
        labels = ids[:, 1:].clone()
        if not self.score_every_token:  # the first block's next ids, which no head can know, are not scored
            labels[torch.arange(self.seq_len).unsqueeze(0) < periods] = IGNORE_INDEX
        return ids[:, :-1].clone(), labels
