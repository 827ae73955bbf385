"""DeepSeek Sparse Attention (DSA; DeepSeek-AI, "DeepSeek-V3.2", 2025): a small "lightning indexer" scores every
key a query may see, and attention runs over the `topk` best, the same keys for every head.

    q^I_{t,j} = W_q^I c_t                   (B, T, H_I, d_I)  c_t the queries' latent c_Q (heads=mla with q_rank),
                                                              else x_t; j = 1..H_I the indexer's heads
    k^I_s = LayerNorm(W_k^I x_s)             (B, S, d_I)       one index key per token, shared by the heads; both
                                                              turned by RoPE on their first rope_dim channels
    w_{t,j} = (W_w x_t)_j / sqrt(H_I)        (B, T, H_I)       each indexer head's weight, from the token
    I_{t,s} = Σ_j w_{t,j} ReLU(q^I_{t,j}·k^I_s / sqrt(d_I))            the index score, in float32
    chosen_t = top-k_s I_{t,s} over the keys the mask lets t see (all of them where fewer than k; ties to the
               earlier key)

As transformers' DeepseekV32Indexer computes it (its eager path: no Hadamard rotation, no FP8), and fla-core's
`naive_dsa_indexer` with w_{t,j} = (W_w x_t)_j / sqrt(H_I). The index keys join the layer's KV cache, d_I numbers a
token.

The choice is a top-k, with no gradient: the indexer learns from a loss of its own, as DeepSeek-V3.2 (§2.1) trains
it (`train_indexer`), the KL divergence from the heads' attention, summed over the heads and normalised over the
keys, p_t, to softmax(I_t), in training (the mean over queries, andrea.core.own_loss):

    sparse   attention over the chosen keys; the KL over them; the indexer's input detached, so the indexer
             learns from this loss alone and the rest of the model from the task's (the paper's sparse stage)
    dense    attention over every key the mask allows; the KL over them; every weight but the indexers' frozen
             (the paper's dense warm-up, from a trained dense model)
    none     the indexer learns nothing: its choice from the weights it has
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.kv_cache import KVCache
from andrea.attention.positions import Rotary
from andrea.attention.selection.base import Selection, SelectionSizes
from andrea.core.hook_points import HookPoint
from andrea.utils.rules import POSITIVE, enforce, integer, one_of, optional

TRAINING = ("sparse", "dense", "none")  # selection.train_indexer
SETTINGS = {"topk": POSITIVE, "index_heads": POSITIVE, "index_head_dim": POSITIVE, "rope_dim": optional(integer(0)),
            "train_indexer": one_of(*TRAINING)}  # fmt: skip
INDEX_KEYS = "dsa_index_keys"  # what the KV cache keeps of each token for the indexer
NORM_EPS = 1e-6  # the index keys' LayerNorm (DeepSeek-V3.2's)


class DSA(Selection):
    name = "dsa"
    shared_by_heads = True
    kit_settings: ClassVar[dict[str, Any]] = {"topk": 5, "index_heads": 2, "index_head_dim": 8}

    def __init__(
        self, sizes: SelectionSizes, *, topk: int = 16, index_heads: int = 4, index_head_dim: int = 32,
        rope_dim: int | None = None, train_indexer: str = "sparse",
    ) -> None:  # fmt: skip
        """rope_dim: the index heads' channels RoPE turns, null: latent attention's d_R (heads.latent.rope_dim)
        under heads=mla, else half of index_head_dim (DeepSeek-V3.2 turns 64 of 128); none without RoPE."""
        super().__init__()
        enforce(SETTINGS, dict(topk=topk, index_heads=index_heads, index_head_dim=index_head_dim,
                               rope_dim=rope_dim, train_indexer=train_indexer), "selection.")  # fmt: skip
        self.topk, self.index_heads, self.index_head_dim = topk, index_heads, index_head_dim
        self.train_indexer, self.scale = train_indexer, sizes.scale
        self.own_loss: Tensor | None = None  # the indexer's KL of the last forward pass in training
        self.freezes_the_rest = train_indexer == "dense"  # the warm-up trains the indexers alone
        self.cache_width = index_head_dim  # the index key of each token
        self.query_latent = sizes.query_latent
        self.q_proj = nn.Linear(sizes.query_width, index_heads * index_head_dim, bias=False)  # W_q^I (wq_b)
        self.k_proj = nn.Linear(sizes.d_model, index_head_dim, bias=False)  # W_k^I (wk)
        self.k_norm = nn.LayerNorm(index_head_dim, eps=NORM_EPS)
        self.weights_proj = nn.Linear(sizes.d_model, index_heads, bias=False)  # W_w
        self.rotary = _rotary(sizes, rope_dim, index_head_dim)
        _check_learning(sizes, topk, train_indexer)
        if train_indexer == "none":  # it learns nothing: no weight of it waits for a gradient (DDP would)
            self.requires_grad_(False)

    def forward(
        self, x: Tensor, q: Tensor, k: Tensor, allowed: Tensor, start: int, cache: KVCache | None,
        points: Mapping[str, HookPoint], documents: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        """The top-k keys of each query by the index score: (B, 1, T, S); with train_indexer=dense, every key."""
        del documents  # the mask keeps each query within its document
        learns = self.training and self.train_indexer != "none" and torch.is_grad_enabled()
        scores = points["hook_selection_scores"](self.scores(x, start, cache, detached=learns))  # (B, T, S)
        visible = allowed.any(dim=1)  # (B or 1, T, S): a key some head may see
        scores = scores.masked_fill(~visible, float("-inf"))
        chosen = top_keys(scores, self.topk)  # (B, T, S)
        # (B, 1 or H, T, S); the warm-up's, a copy of what the mask allows (a hook may edit what it is given)
        chosen = allowed.clone() if self.train_indexer == "dense" else chosen.unsqueeze(1) & allowed
        self.own_loss = self._divergence(q.detach(), k.detach(), chosen, scores) if learns else None
        return chosen

    def _divergence(self, q: Tensor, k: Tensor, keys: Tensor, scores: Tensor) -> Tensor:
        """KL(p_t || softmax(I_t)) over the attended keys, the mean over the queries that have one: p_t the heads'
        softmax weights q·k · scale summed over the heads and normalised over the keys (float32, no gradient)."""
        H, group = q.shape[1], q.shape[1] // k.shape[1]
        p = scores.new_zeros(scores.shape)  # (B, T, S)
        for h in range(H):  # a head at a time: (B, T, S) at once, not (B, H, T, S)
            logits = q[:, h].float() @ k[:, h // group].float().transpose(-1, -2) * self.scale
            hidden = ~keys[:, h if keys.shape[1] > 1 else 0]
            p += torch.softmax(logits.masked_fill(hidden, float("-inf")), dim=-1).nan_to_num(0.0)
        rows = p.sum(dim=-1) > 0  # a query that attends to a key
        p = p / p.sum(dim=-1, keepdim=True).clamp(min=1e-30)
        attended = keys.any(dim=1)  # (B, T, S)
        log_index = torch.log_softmax(scores.masked_fill(~attended, float("-inf")), dim=-1)
        terms = torch.where(p > 0, p * (p.clamp(min=1e-30).log() - log_index), 0.0)  # 0 · log 0 = 0
        return terms.sum(dim=-1)[rows].mean() if rows.any() else scores.new_zeros(()).requires_grad_()

    def scores(self, x: Tensor, start: int, cache: KVCache | None, detached: bool = False) -> Tensor:
        """x (B, T, D) at positions start.. -> the index scores I (B, T, S) over every key, the cached ones too;
        `detached`: from the indexer's inputs (x, c_Q) cut from the graph, so its loss reaches its own weights only."""
        B, T, _ = x.shape
        source = x if self.query_latent is None else self.query_latent(x)
        if detached:
            x, source = x.detach(), source.detach()
        q = self.q_proj(source).view(B, T, self.index_heads, self.index_head_dim).transpose(1, 2)  # (B, H_I, T, d_I)
        k = self.k_norm(self.k_proj(x)).unsqueeze(1)  # (B, 1, T, d_I)
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)
        if cache is not None:
            k = cache.extend_side(INDEX_KEYS, k)  # (B, 1, S, d_I)
        weights = self.weights_proj(x).float() / self.index_heads**0.5  # (B, T, H_I)
        keys = k[:, 0].float().transpose(-1, -2)  # (B, d_I, S)
        scores = torch.zeros(B, T, keys.shape[-1], device=x.device)
        for j in range(self.index_heads):  # a head at a time: (B, T, S) at once, not (B, H_I, T, S)
            scores += F.relu(q[:, j].float() @ keys / self.index_head_dim**0.5) * weights[..., j, None]
        return scores

    def keep_every_key(self, length: int) -> None:
        self.topk = length

    def extra_repr(self) -> str:
        return f"topk={self.topk}, index_heads={self.index_heads}, index_head_dim={self.index_head_dim}"


def top_keys(scores: Tensor, k: int) -> Tensor:
    """(..., S) scores, -inf where a key may not be chosen -> the k best keys of each row (all the finite ones where
    fewer), ties to the earlier key, as a stable sort ranks them: a key at 0 (every ReLU shut) ties often, and a
    choice among ties that moved with the number of keys would make cached decoding differ from the full pass.
    torch.topk finds the k-th score; of the keys that equal it, the earliest fill what the better ones leave."""
    kth = scores.topk(min(k, scores.shape[-1]), dim=-1).values[..., -1:]  # (..., 1)
    above, tied = scores > kth, scores == kth
    room = min(k, scores.shape[-1]) - above.sum(dim=-1, keepdim=True)
    return (above | (tied & (tied.cumsum(dim=-1) <= room))) & (scores > float("-inf"))


def _rotary(sizes: SelectionSizes, rope_dim: int | None, index_head_dim: int) -> Rotary | None:
    """RoPE on the index heads' first rope_dim channels (null: latent attention's d_R, else half), where the layer
    turns its own queries and keys."""
    turned = rope_dim if rope_dim is not None else sizes.rope_dim or index_head_dim // 2
    if sizes.rope and (not 0 < turned <= index_head_dim or turned % 2):
        raise ValueError(
            f"selection.rope_dim={turned} must be even and between 1 and selection.index_head_dim="
            f"{index_head_dim}: RoPE turns the index heads' first channels in pairs"
        )
    return Rotary(index_head_dim, sizes.rope_base, fraction=turned / index_head_dim) if sizes.rope else None


def _check_learning(sizes: SelectionSizes, topk: int, train_indexer: str) -> None:
    """Refuse a top-k that keeps the whole context, and an indexer loss toward weights the layer does not compute."""
    if topk >= sizes.max_context:
        raise ValueError(
            f"selection.topk={topk} keeps every key of the context (model.net.max_context={sizes.max_context}): "
            f"attention would be dense; give a topk below {sizes.max_context}, or selection=none"
        )
    if train_indexer != "none" and sizes.scores_problem:
        raise ValueError(
            f"selection.train_indexer={train_indexer} trains the indexer toward the heads' softmax(q·k · scale), "
            f"which {sizes.scores_problem} does not compute; use a softmax mechanism without ALiBi, or "
            "selection.train_indexer=none"
        )
