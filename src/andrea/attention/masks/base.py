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
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor


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
        return AndMask(self, other)

    def __or__(self, other: Mask) -> Mask:
        return OrMask(self, other)

    def __repr__(self) -> str:
        return f"<mask {self.name}>"

    def draw(self, path: str | Path, length: int = 16, batch_index: int = 0) -> str:
        """Draw the mask for a sequence of `length` tokens to a PNG file; returns the path."""
        from andrea.attention.masks.draw import draw_mask

        return draw_mask(self, path, length=length, batch_index=batch_index)


@dataclass(frozen=True, repr=False)
class AndMask(Mask):
    """A key is allowed when both masks allow it."""

    left: Mask
    right: Mask
    kind: ClassVar[str] = "and"

    @property
    def name(self) -> str:
        return f"({self.left.name}&{self.right.name})"

    @property
    def kinds(self) -> frozenset[str]:
        return self.left.kinds | self.right.kinds

    @property
    def batch_dependent(self) -> bool:  # type: ignore[override]
        return self.left.batch_dependent or self.right.batch_dependent

    @property
    def head_dependent(self) -> bool:  # type: ignore[override]
        return self.left.head_dependent or self.right.head_dependent

    @property
    def is_causal(self) -> bool:  # type: ignore[override]
        return (self.left.is_causal and (self.right.is_causal or self.right.is_full)) or (
            self.right.is_causal and self.left.is_full
        )

    @property
    def is_full(self) -> bool:  # type: ignore[override]
        return self.left.is_full and self.right.is_full

    @property
    def attends_self(self) -> bool:  # type: ignore[override]
        return self.left.attends_self and self.right.attends_self

    @property
    def translation_invariant(self) -> bool:  # type: ignore[override]
        return self.left.translation_invariant and self.right.translation_invariant

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        bounds = [m.max_lookback for m in (self.left, self.right) if m.max_lookback is not None]
        return min(bounds) if bounds and self.translation_invariant else None

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return self.left.predicate(b, h, q_idx, kv_idx) & self.right.predicate(b, h, q_idx, kv_idx)


@dataclass(frozen=True, repr=False)
class OrMask(Mask):
    """A key is allowed when either mask allows it."""

    left: Mask
    right: Mask
    kind: ClassVar[str] = "or"

    @property
    def name(self) -> str:
        return f"({self.left.name}|{self.right.name})"

    @property
    def kinds(self) -> frozenset[str]:
        return self.left.kinds | self.right.kinds

    @property
    def batch_dependent(self) -> bool:  # type: ignore[override]
        return self.left.batch_dependent or self.right.batch_dependent

    @property
    def head_dependent(self) -> bool:  # type: ignore[override]
        return self.left.head_dependent or self.right.head_dependent

    @property
    def is_causal(self) -> bool:  # type: ignore[override]
        return self.left.is_causal and self.right.is_causal

    @property
    def is_full(self) -> bool:  # type: ignore[override]
        return self.left.is_full or self.right.is_full

    @property
    def attends_self(self) -> bool:  # type: ignore[override]
        return self.left.attends_self or self.right.attends_self

    @property
    def translation_invariant(self) -> bool:  # type: ignore[override]
        return self.left.translation_invariant and self.right.translation_invariant

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        bounds = [m.max_lookback for m in (self.left, self.right) if m.max_lookback is not None]
        return max(bounds) if len(bounds) == 2 and self.translation_invariant else None

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return self.left.predicate(b, h, q_idx, kv_idx) | self.right.predicate(b, h, q_idx, kv_idx)


class PrecomputedMask(Mask):
    """A static mask whose dense form was built once at a maximum size (a module
    buffer) and is sliced at run time. Compares equal to the mask it wraps, so
    backend caches keyed by the mask still hit."""

    # Plain attributes, copied once: backends read them on every call.
    kind = name = kinds = None  # type: ignore[assignment]
    is_causal = is_full = attends_self = head_dependent = translation_invariant = False
    max_lookback = None

    def __init__(self, mask: Mask, dense_max: Tensor) -> None:
        if mask.batch_dependent:
            raise ValueError(f"mask {mask.name} depends on the batch and cannot be precomputed")
        self.mask = mask
        self.dense_max = dense_max  # (1, H or 1, L, L)
        self.kind, self.name, self.kinds = mask.kind, mask.name, mask.kinds
        # Mask declares these per class (ClassVar); a PrecomputedMask holds the wrapped mask's per instance.
        self.is_causal, self.is_full = mask.is_causal, mask.is_full  # type: ignore[misc]  # ClassVar set per instance
        self.attends_self = mask.attends_self  # type: ignore[misc]  # ClassVar set per instance
        self.head_dependent = mask.head_dependent  # type: ignore[misc]  # ClassVar set per instance
        self.translation_invariant = mask.translation_invariant  # type: ignore[misc]  # ClassVar set per instance
        self.max_lookback = mask.max_lookback

    def predicate(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return self.mask.predicate(b, h, q_idx, kv_idx)

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
