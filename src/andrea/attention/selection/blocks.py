"""Blocks of keys, as MoBA and NSA cut them: `block_size` keys a block, counted from position 0 of the text, or
from each document's first token where the mask packs documents (MoBA's varlen numbering, and fla-core's
`prepare_chunk_offsets` for NSA), so no block ever holds two documents' keys.

A layer's KV cache may hold the keys of a window only (a sliding-window mask trims it): a block begun before the
first key the cache holds is then held in part, and numbered from the first key held.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def _opens(
    S: int, offset: int, block_size: int, documents: Tensor | None, device: torch.device
) -> tuple[Tensor, Tensor]:
    """(B or 1, S) twice: the index of each key's document's first key (position 0 of the text without
    documents), and of its block's first key; both below 0 where the cache has dropped them."""
    held = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    if documents is None:
        opens = torch.zeros_like(held) - offset  # position 0 of the text, where the cache's index is -offset
    else:  # a document opens where its id differs from the key before
        ids = documents[:, :S].to(device)
        new = torch.ones_like(ids, dtype=torch.bool)
        new[:, 1:] = ids[:, 1:] != ids[:, :-1]
        opens = torch.where(new, held, 0).cummax(dim=-1).values
    return opens, opens + (held - opens) // block_size * block_size


@dataclass(frozen=True)
class Blocks:
    """The blocks of the S keys a layer holds, numbered 0..C-1 in order (a compact form: C about S / block_size);
    where documents cut the rows of a batch differently, C is the largest row's count, and a shorter row's blocks
    past its last hold no key (`held` 0).

    index   (B or 1, S) each key's block
    begins  (B or 1, C) each block's first key's index (below 0: begun before the cache's first key)
    first   (B or 1, C) whether the block is its document's first (the text's, without documents)
    """

    index: Tensor
    begins: Tensor
    first: Tensor
    block_size: int

    @classmethod
    def of(cls, S: int, offset: int, block_size: int, documents: Tensor | None, device: torch.device) -> Blocks:
        opens, begins = _opens(S, offset, block_size, documents, device)
        new = torch.ones_like(begins, dtype=torch.bool)
        new[:, 1:] = begins[:, 1:] != begins[:, :-1]
        index = new.cumsum(dim=-1) - 1  # (B or 1, S)
        count = int(index.max()) + 1
        block_begins = torch.zeros(begins.shape[0], count, dtype=begins.dtype, device=device).scatter(-1, index, begins)
        block_opens = torch.zeros_like(block_begins).scatter(-1, index, opens)
        return cls(index, block_begins, block_begins == block_opens, block_size)

    @property
    def count(self) -> int:
        return self.begins.shape[-1]

    def per_block(self, keys: Tensor) -> Tensor:
        """(..., S) numbers a key -> (..., C) their sums a block (a key's count of allowed keys, say)."""
        keys = keys.expand(max(keys.shape[0], self.index.shape[0]), *keys.shape[1:])
        index = self.index.view(self.index.shape[0], *[1] * (keys.dim() - 2), -1).expand_as(keys)
        sums = torch.zeros(*keys.shape[:-1], self.count, dtype=keys.dtype, device=keys.device)
        return sums.scatter_add(-1, index, keys)

    def per_key(self, blocks: Tensor) -> Tensor:
        """(B, H, T, C) a value a block -> (B, H, T, S) each key its block's."""
        B, H, T, _ = blocks.shape
        index = self.index.view(self.index.shape[0], 1, 1, -1).expand(B, H, T, -1)
        return blocks.gather(-1, index)

    def means(self, x: Tensor) -> Tensor:
        """(B, H_kv, S, d) keys or values -> each block's mean over the keys held (B, H_kv, C, d), in float32 at
        least."""
        B, H_kv, S, d = x.shape
        dtype = torch.promote_types(x.dtype, torch.float32)
        index = self.index.view(self.index.shape[0], 1, S, 1).expand(B, H_kv, S, d)
        sums = torch.zeros(B, H_kv, self.count, d, dtype=dtype, device=x.device).scatter_add(2, index, x.to(dtype))
        return sums / self.held().to(dtype).clamp(min=1).view(-1, 1, self.count, 1)

    def held(self) -> Tensor:
        """(B or 1, C) the keys of each block the cache holds."""
        return self.per_block(torch.ones_like(self.index))
