"""Native Sparse Attention (NSA; Yuan et al., DeepSeek-AI, 2025): three branches of attention over the past,
mixed per head by gates the token sets:

    o_t = g^cmp_t · Attn(q_t, K̃, Ṽ) + g^slc_t · Attn(q_t, K^slc_t, V^slc_t) + g^win_t · Attn(q_t, K^win_t, V^win_t)
    (g^cmp, g^slc, g^win)_t = sigmoid(W_g x_t)                                 each (B, H, T): a head's own gates

    compressed  blocks of block_size keys (from position 0, or each document's first key), each pooled to its mean
                key and value, K̃ and Ṽ; query t sees a block once every key of it is visible (fla-core's
                (c + 1)·l - 1 <= t under causal)
    selected    the topk_blocks blocks of highest p_t = softmax_c(q_t · K̃_c · scale) (the compressed branch's own
                weights), averaged over the query heads that share a key head, one choice a group (the paper's sum
                over the group: the same order); its own block, the previous one and its document's first ahead of
                them, in that order (the paper's two local and one initial blocks); attention over the chosen
                blocks' keys under the mask (causal inside the own block): hook_selected shows these keys
    window      the last `window` keys the mask allows, the query's own among them

As fla-core writes NSA (fla/ops/nsa/naive.py: mean pooling, selection blocks the size of the compression's, no
stride, the selection's forced blocks), its ops proven equal in tests/attention/test_selection.py. The paper
differs: its φ compresses a block by a learned MLP over overlapping blocks (l = 32, stride 16), selects in blocks
of 64, and gives each branch keys and values of its own; here the three branches read the layer's q, k and v.

The weights the layer reports (the maps, the heads' verdicts) are what the heads use: Σ_branch g · the branch's
weights, a compressed block's weight shared by its keys (a mean value is its keys' values each weighted 1/l), so
out = weights · V exactly. The compressed and selected branches read softmax weights: the layer's mechanism must be
softmax without ALiBi (refused in one line otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from andrea.attention.kv_cache import KVCache
from andrea.attention.masks.base import Mask
from andrea.attention.masks.selected import Selected
from andrea.attention.selection.base import Selection, SelectionSizes
from andrea.attention.selection.blocks import Blocks
from andrea.core.hook_points import HookPoint
from andrea.utils.rules import POSITIVE, enforce

SETTINGS = {"block_size": POSITIVE, "topk_blocks": POSITIVE, "window": POSITIVE}
CMP, SLC, WIN = range(3)  # the gates' order, the paper's


@dataclass(frozen=True)
class _Branches:
    """What a forward pass found for the branches `attend` then mixes."""

    blocks: Blocks
    scores: Tensor  # (B, H, T, C) q · K̃ · scale, under the visible blocks' mask (-inf elsewhere)
    window: Tensor  # (B or 1, 1, T, S) the window's keys the mask allows
    gates: Tensor  # (B, H, T, 3)


class NSA(Selection):
    name = "nsa"
    shared_by_heads = False
    kit_settings: ClassVar[dict[str, Any]] = {"block_size": 3, "topk_blocks": 3, "window": 4}

    def __init__(self, sizes: SelectionSizes, *, block_size: int = 4, topk_blocks: int = 4, window: int = 8) -> None:
        super().__init__()
        enforce(SETTINGS, dict(block_size=block_size, topk_blocks=topk_blocks, window=window), "selection.")
        _check(sizes, block_size, topk_blocks, window)
        self.block_size, self.topk_blocks, self.window = block_size, topk_blocks, window
        self.scale, self.group = sizes.scale, sizes.n_head // sizes.kv_heads
        self.gate_proj = nn.Linear(sizes.d_model, 3 * sizes.n_head)  # W_g: three gates a head
        self.chosen_only = False
        self._pending: _Branches | None = None

    def forward(
        self, x: Tensor, q: Tensor, k: Tensor, allowed: Tensor, start: int, cache: KVCache | None,
        points: Mapping[str, HookPoint], documents: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        """The keys of each query's chosen blocks: (B, H, T, S); the other branches' inputs kept for `attend`."""
        del cache  # the blocks' means are read from the keys and values the cache holds
        B, H, T, _ = q.shape
        S = k.shape[2]
        blocks = Blocks.of(S, start + T - S, self.block_size, documents, q.device)
        seen = blocks.per_block(allowed.int())  # (B or 1, H or 1, T, C): keys of each block a query may see
        means = blocks.means(k).repeat_interleave(H // k.shape[1], dim=1)  # (B, H, C, d), float32 at least
        scores = (q.to(means.dtype) @ means.transpose(-1, -2) * self.scale).masked_fill(
            seen != self.block_size, float("-inf")
        )  # (B, H, T, C): a block is seen whole or not at all
        importance = torch.softmax(scores.detach(), dim=-1).nan_to_num(0.0)
        importance = importance.unflatten(1, (H // self.group, self.group)).mean(2).repeat_interleave(self.group, 1)
        picked = self._pick(points["hook_selection_scores"](importance), blocks, seen, T)  # (B, H, T, C)
        gates = torch.sigmoid(self.gate_proj(x)).unflatten(-1, (H, 3)).transpose(1, 2)  # (B, H, T, 3)
        self._pending = _Branches(blocks, scores, self._window(start, T, S, q.device) & allowed, gates)
        return blocks.per_key(picked) & allowed

    def _pick(self, importance: Tensor, blocks: Blocks, seen: Tensor, T: int) -> Tensor:
        """The topk_blocks blocks each query attends to (B, H, T, C): the forced ones first (its own, the one before
        its own, its document's first, in that order where fewer are asked for), then the best seen whole, ties to
        the earlier block."""
        C = blocks.count
        own = blocks.index[:, -T:].unsqueeze(-1)  # (B or 1, T, 1): each query's block
        ids = torch.arange(C, device=own.device)
        opens_own = blocks.first.gather(-1, own.squeeze(-1)).unsqueeze(-1)  # its own block opens its document
        rank = torch.where(blocks.first.unsqueeze(1), 2.0, 0.0)  # (B or 1, T, C), above every weight (at most 1)
        rank = torch.where((ids == own - 1) & ~opens_own, 3.0, rank)
        rank = torch.where(ids == own, 4.0, rank).unsqueeze(1)
        forced = (rank > 0) & (seen > 0)  # where the query may see a key of it (a window's mask may hide one)
        ranked = torch.where(forced, rank, importance)
        ranked = ranked.masked_fill(~(forced | (seen == self.block_size)), float("-inf"))
        order = ranked.sort(dim=-1, descending=True, stable=True)
        keep = min(self.topk_blocks, C)
        picked = torch.zeros_like(ranked, dtype=torch.bool)
        return picked.scatter(-1, order.indices[..., :keep], order.values[..., :keep] > float("-inf"))

    def _window(self, start: int, T: int, S: int, device: torch.device) -> Tensor:
        """(1, 1, T, S): the `window` keys up to each query's own."""
        behind = (start + torch.arange(T, device=device)).view(T, 1) - (start + T - S + torch.arange(S, device=device))
        return ((behind >= 0) & (behind < self.window)).view(1, 1, T, S)

    def attend(
        self, attend: Callable[[Mask, bool], tuple[Tensor, Tensor | None]], q: Tensor, v: Tensor, chosen: Mask,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """The three branches, mixed by the gates; weights Σ g · each branch's over the keys."""
        branches, self._pending = self._pending, None
        assert branches is not None, "NSA.attend follows its forward pass"
        selected, selected_weights = attend(chosen, need_weights)
        if self.chosen_only:
            return selected, selected_weights
        window, window_weights = attend(Selected(branches.window), need_weights)
        weights = torch.softmax(branches.scores, dim=-1).nan_to_num(0.0)  # (B, H, T, C): no block seen: none
        means = branches.blocks.means(v).repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        compressed = (weights @ means).to(selected.dtype)  # (B, H, T, d_v)
        g = branches.gates.unsqueeze(-1).to(selected.dtype)  # (B, H, T, 3, 1)
        out = g[..., CMP, :] * compressed + g[..., SLC, :] * selected + g[..., WIN, :] * window
        if not need_weights:
            return out, None
        assert selected_weights is not None and window_weights is not None
        spread = branches.blocks.per_key(weights.to(selected.dtype)) / self.block_size  # a block's keys share it
        g = g.squeeze(-1)
        return out, g[..., CMP, None] * spread + g[..., SLC, None] * selected_weights + g[
            ..., WIN, None
        ] * window_weights

    def attend_chosen_only(self) -> None:
        self.chosen_only = True

    def keep_every_key(self, length: int) -> None:
        self.topk_blocks = length  # no more blocks than keys, however documents cut them

    def extra_repr(self) -> str:
        return f"block_size={self.block_size}, topk_blocks={self.topk_blocks}, window={self.window}"


def _check(sizes: SelectionSizes, block_size: int, topk_blocks: int, window: int) -> None:
    """Refuse branches that cover the context, and weights the layer does not compute."""
    if block_size * topk_blocks >= sizes.max_context or window >= sizes.max_context:
        raise ValueError(
            f"selection.topk_blocks={topk_blocks} blocks of selection.block_size={block_size}, or "
            f"selection.window={window}, cover the context (model.net.max_context={sizes.max_context}): a branch "
            "would be causal attention; give fewer or smaller blocks and a shorter window, or selection=none"
        )
    if sizes.scores_problem:
        raise ValueError(
            f"selection=nsa ranks blocks by the heads' softmax(q·k · scale), which {sizes.scores_problem} does not "
            "compute; use a softmax mechanism without ALiBi, or another selection"
        )
