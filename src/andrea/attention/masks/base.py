"""The mask contract: which keys each query may see, defined once as an index predicate.

A mask is never stored as a matrix by its author. It is a predicate over
indices with FlexAttention's `mask_mod` signature, `predicate(b, h, q_idx,
kv_idx) -> bool tensor` (True: the query may attend to the key), and every
backend converts it to what it needs: a dense boolean tensor, a Flex
BlockMask, or SDPA's `is_causal` fast path.

Query indices are absolute positions. With T queries over S keys (a KV cache
holding S - T earlier tokens), query i sits at position S - T + i: the queries
are aligned to the END of the keys. For T == S this is the usual square mask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor

from andrea.attention.masks.params import MaskParams

# What a mask promises about itself; backends and the KV cache act on these, the kit verifies them.
FLAGS = (
    "batch_dependent",
    "head_dependent",
    "is_causal",
    "is_full",
    "attends_self",
    "translation_invariant",
    "max_lookback",
)


class Mask(ABC):
    """One mask strategy. Subclasses are small frozen dataclasses, so two masks
    with the same parameters compare (and hash) equal, which keys backend caches."""

    kind: ClassVar[str]  # the registry name of the strategy: "causal", "padding", ...
    batch_dependent: ClassVar[bool] = False  # reads per-sequence data (lengths, segment ids)
    head_dependent: ClassVar[bool] = False  # differs between heads
    is_causal: ClassVar[bool] = False  # exactly the causal mask: backends may take a fast path
    is_full: ClassVar[bool] = False  # masks nothing: backends may skip the mask
    attends_self: ClassVar[bool] = False  # every query sees its own position, so no row is empty
    translation_invariant: ClassVar[bool] = False  # depends on q_idx - kv_idx only
    max_lookback: ClassVar[int | None] = None  # a query never sees a key this many positions back or more

    @property
    def name(self) -> str:
        """A self-describing name for logs and plots, e.g. `sliding_window_64`."""
        return self.kind

    @property
    def kinds(self) -> frozenset[str]:
        """Every strategy this mask is made of (backends declare the kinds they accept)."""
        return frozenset({self.kind})

    @abstractmethod
    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """True where query `q_idx` may attend to key `kv_idx` (broadcasting index tensors)."""

    def params(self) -> MaskParams | None:
        """The mask as kernel parameters (andrea.attention.masks.params), or None where they cannot say it:
        a backend then reads its dense form. A plugin mask that fits them may override it."""
        return None

    def check_context(self, seq_len: int) -> None:
        """Refuse (ValueError, one line naming the mask's key) parameters that make no sense for
        sequences of `seq_len` tokens. The validation step calls it for every mask, a plugin's too."""
        return None  # a mask without parameters fits any context

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        """Instances for the conformance kit (andrea.testing) to check every backend and this mask's flags
        with, for a batch of `batch` sequences of `seq` tokens. A mask with parameters overrides it."""
        return [cls()]

    def dense(
        self,
        q_len: int,
        kv_len: int,
        *,
        batch_size: int = 1,
        num_heads: int = 1,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """The mask as a boolean tensor (B or 1, H or 1, T, S), True = attend."""
        if q_len > kv_len:
            raise ValueError(f"mask {self.name}: {q_len} queries over {kv_len} keys; queries cannot outnumber keys")
        b = torch.arange(batch_size if self.batch_dependent else 1, device=device).view(-1, 1, 1, 1)
        h = torch.arange(num_heads if self.head_dependent else 1, device=device).view(1, -1, 1, 1)
        q_idx = torch.arange(kv_len - q_len, kv_len, device=device).view(1, 1, -1, 1)
        kv_idx = torch.arange(kv_len, device=device).view(1, 1, 1, -1)
        allowed = self.predicate(b, h, q_idx, kv_idx)
        return allowed.expand(b.shape[0], h.shape[1], q_len, kv_len)

    def __and__(self, other: Mask) -> Mask:
        from andrea.attention.masks.combine import combine

        return combine("&", self, other)

    def __or__(self, other: Mask) -> Mask:
        from andrea.attention.masks.combine import combine

        return combine("|", self, other)

    def __repr__(self) -> str:
        return f"<mask {self.name}>"

    def draw(self, path: str | Path, length: int = 16, batch_index: int = 0) -> str:
        """Draw the mask for a sequence of `length` tokens to a PNG file; returns the path."""
        from andrea.attention.masks.draw import draw_mask

        return draw_mask(self, path, length=length, batch_index=batch_index)


class PrecomputedMask(Mask):
    """A static mask whose dense form was built once at a maximum size (a module
    buffer) and is sliced at run time. Compares equal to the mask it wraps, so
    backend caches keyed by the mask still hit."""

    name = kinds = None  # type: ignore[assignment]  # plain attributes here, not Mask's properties: set in __init__

    def __init__(self, mask: Mask, dense_max: Tensor) -> None:
        if mask.batch_dependent:
            raise ValueError(f"mask {mask.name} depends on the batch and cannot be precomputed")
        self.mask = mask
        self.dense_max = dense_max  # (1, H or 1, L, L)
        for attribute in ("kind", "name", "kinds", *FLAGS):  # copied once: backends read them on every call
            setattr(self, attribute, getattr(mask, attribute))

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return self.mask.predicate(b, h, q_idx, kv_idx)

    def params(self) -> MaskParams | None:
        return self.mask.params()

    def dense(
        self,
        q_len: int,
        kv_len: int,
        *,
        batch_size: int = 1,
        num_heads: int = 1,
        device: torch.device | str | None = None,
    ) -> Tensor:
        if kv_len > self.dense_max.shape[-1]:
            return self.mask.dense(q_len, kv_len, batch_size=batch_size, num_heads=num_heads, device=device)
        # Queries are aligned to the end of the keys: rows S-T .. S-1, columns 0 .. S-1.
        return self.dense_max[:, :, kv_len - q_len : kv_len, :kv_len]

    def __eq__(self, other: object) -> bool:
        return self.mask == (other.mask if isinstance(other, PrecomputedMask) else other)

    def __hash__(self) -> int:
        return hash(self.mask)
