"""Mixture of Block Attention (MoBA; Lu et al., Moonshot AI, 2025): the keys are cut into blocks of `block_size`,
and each query attends to its own block and to the past blocks whose mean key it scores highest, each head for
itself.

    block b = the keys at positions b·c .. (b+1)·c - 1           c = block_size, from position 0 (or each document's)
    K̄_b^h = mean of block b's keys of head h                     (B, H, C, d), C blocks
    g_{t,b}^h = q_t^h · K̄_b^h                                    (B, H, T, C): the gate, unscaled, in float32 at
                                                                 least
    chosen_t^h = t's own block, and the top (topk_blocks - 1) blocks by g among those every key of which the
                 mask lets t see (a block wholly in its past, under causal)

The own block is counted in `topk_blocks`, as MoBA's `moba_topk` counts it, and read under the mask (causal inside
it). Attention then runs over the chosen blocks' keys in one softmax, as MoBA's reference computes it. Where the
mask packs documents, the blocks restart at each document's first token, as MoBA's varlen kernels number them (so
no gate ever averages another document's keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from andrea.attention.kv_cache import KVCache
from andrea.attention.selection.base import Selection, SelectionSizes
from andrea.attention.selection.blocks import Blocks
from andrea.core.hook_points import HookPoint
from andrea.utils.rules import POSITIVE, enforce

SETTINGS = {"block_size": POSITIVE, "topk_blocks": POSITIVE}


class MoBA(Selection):
    name = "moba"
    shared_by_heads = False
    kit_settings: ClassVar[dict[str, Any]] = {"block_size": 4, "topk_blocks": 2}

    def __init__(self, sizes: SelectionSizes, *, block_size: int = 8, topk_blocks: int = 2) -> None:
        super().__init__()
        enforce(SETTINGS, dict(block_size=block_size, topk_blocks=topk_blocks), "selection.")
        self.block_size, self.topk_blocks = block_size, topk_blocks
        if block_size * topk_blocks >= sizes.max_context:
            raise ValueError(
                f"selection.topk_blocks={topk_blocks} blocks of selection.block_size={block_size} cover the context "
                f"(model.net.max_context={sizes.max_context}): attention would be causal attention; give fewer or "
                "smaller blocks, or selection=none"
            )

    def forward(
        self, x: Tensor, q: Tensor, k: Tensor, allowed: Tensor, start: int, cache: KVCache | None,
        points: Mapping[str, HookPoint], documents: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        """Each query's own block and its top blocks by the gate: (B, H, T, S)."""
        del x, cache  # the gate reads q and k; the cache holds k already
        B, H, T, _ = q.shape
        S = k.shape[2]
        blocks = Blocks.of(S, start + T - S, self.block_size, documents, q.device)
        means = blocks.means(k).repeat_interleave(H // k.shape[1], dim=1)  # (B, H, C, d), float32 at least
        gates = points["hook_selection_scores"](q.to(means.dtype) @ means.transpose(-1, -2))  # (B, H, T, C)
        seen = blocks.per_block(allowed.int())  # (B or 1, H or 1, T, C): keys of each block a query may see
        own = blocks.index[:, -T:].unsqueeze(1).unsqueeze(-1)  # (B or 1, 1, T, 1): each query's block
        ids = torch.arange(blocks.count, device=q.device)
        held = blocks.held()  # (B or 1, C); 0 for a block number past a shorter row's last (its batch's count)
        held_whole = ((blocks.begins >= 0) & (held > 0)).unsqueeze(1).unsqueeze(1)  # not begun before the cache
        whole = (seen == held.view(-1, 1, 1, blocks.count)) & held_whole & (ids != own)
        gates = gates.masked_fill(~whole, float("-inf"))  # a block every key of which t may see, not its own
        picked = ids == own  # (B or 1, 1, T, C)
        if self.topk_blocks > 1:  # a pick at -inf: fewer wholly visible blocks than asked for
            top = gates.topk(min(self.topk_blocks - 1, blocks.count), dim=-1)
            picked = picked | torch.zeros_like(gates, dtype=torch.bool).scatter(-1, top.indices, top.values > -1e38)
        return blocks.per_key(picked.expand(B, H, T, blocks.count)) & allowed  # key s: is its block picked

    def keep_every_key(self, length: int) -> None:
        self.topk_blocks = -(-length // self.block_size)

    def extra_repr(self) -> str:
        return f"block_size={self.block_size}, topk_blocks={self.topk_blocks}"
