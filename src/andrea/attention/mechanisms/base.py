"""The mechanism contract: what an attention layer computes between its scores and its values.

A backend decides HOW attention is computed (a loop, one batched matmul, a fused kernel); a mechanism
decides WHAT: softmax, sigmoid, a sink logit in the denominator, soft-capped scores, two maps
subtracted, ... Each mechanism is one small nn.Module per attention layer (its parameters, if any,
are the layer's), with up to four parts:

    project(q, k, x)      -> q, k         before positions (RoPE) are applied, given the layer's input x:
                                           QK-norm normalises here
    weights(q, k, mask, scale, score_mod)  the dense (B, H, T, S) map, all heads at once: what `eager`
                                           runs and what a probe shows for backends that never form it
    reference(q, k, v, mask, scale, score_mod) -> out, weights
                                           one head at a time (`head_weights`): what `naive` runs
    formula(q, k, allowed, scale, bias) -> weights
                                           the paper's math on dense scores, written once and on its
                                           own (never calling the parts above), in float64: what the
                                           conformance kit proves every backend against, naive and
                                           eager included
    combine(z, x)         -> z            the heads' outputs (B, H, T, d) before W_O: the gate of gated
                                           attention, differential attention's per-head norm

`kernel` names the math a backend must run between the scores and the values: "softmax" for every
mechanism that changes only what goes in or comes out (softmax, gated, qknorm), its own name
otherwise. A backend declares the kernels it runs (Capabilities.kernels); one that computes any
mechanism's dense form (eager, naive) declares None.

`rope_parts` says how many heads of their own a head's queries and keys hold, side by side: RoPE rotates
each as a head of d / rope_parts channels (differential attention's two halves: 2), so that each part's q·k
depends on i - j only.

`rows_sum_to_one`, `signed` and `weights_meaning` say what the weights are (a sigmoid map is not a
distribution over keys, a differential map has negative weights): the head-role scores read rows that do
not sum to 1 as shares of their absolute weight (docs/head_roles.md), maps draw signed weights on a
red-white-blue scale, and every map names the mechanism and the meaning.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.attention.positions import ScoreMod


class Mechanism(nn.Module):
    name: ClassVar[str]
    kernel: ClassVar[str] = "softmax"
    rope_parts: ClassVar[int] = 1  # heads of their own in each head's q and k, each rotated on its own
    extra_channels: ClassVar[int] = 0  # channels `extend` appends to every head's q and k
    rows_sum_to_one: ClassVar[bool] = True
    signed: ClassVar[bool] = False  # whether a weight can be negative
    weights_meaning: ClassVar[str] = "softmax weights (each row sums to 1)"

    def __init__(
        self,
        *,
        n_head: int,
        head_dim: int,
        d_model: int,
        max_context: int,
        layer: int = 0,
        n_layer: int = 1,
        projection_bias: bool = False,
        n_kv_head: int | None = None,
    ) -> None:
        """The layer's sizes (every mechanism gets them all; its own settings come as further keywords).
        `layer` counts from 0 among the network's `n_layer` attention layers; `projection_bias` says whether
        the layer's projections carry a bias (model.net.bias), which a mechanism's own projections follow;
        `n_kv_head`: the key and value heads (None: n_head)."""
        super().__init__()
        self.n_head, self.head_dim, self.d_model, self.max_context = n_head, head_dim, d_model, max_context
        self.n_kv_head = n_head if n_kv_head is None else n_kv_head
        self.layer, self.n_layer, self.projection_bias = layer, n_layer, projection_bias

    def project(self, q: Tensor, k: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        """q (B, H, T, d), k (B, H_kv, T, d) as they leave the projection, before RoPE, given the layer's input
        x (B, T, D): where a mechanism that depends on x (a gate computed from it) sees it before any score."""
        return q, k

    def extend(self, q: Tensor, k: Tensor, x: Tensor, cached: Tensor | None) -> tuple[Tensor, Tensor]:
        """q (B, H, T, d), k (B, H_kv, T, d) after positions, before the KV cache takes k: `extra_channels` more
        channels for each (forgetting attention's gate rides there), given x and the cached keys (B, H_kv, S', ·)
        or None. A mechanism that extends needs a backend whose values may be narrower than its keys."""
        return q, k

    def scale(self) -> float | None:
        """The score scale the block asks for; None: the contract's 1/sqrt(head_dim)."""
        return None

    def combine(self, z: Tensor, x: Tensor) -> Tensor:
        """z (B, H, T, d), the heads' outputs, given the block's input x (B, T, D)."""
        return z

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        """Scores -> weights: scores (B, H, T, S) with head None, or one head's (B, T, S); `allowed` shaped
        like them (broadcastable), True where the mask lets a query see a key; a row with no key is 0."""
        raise NotImplementedError

    def weights(self, q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None) -> Tensor:
        """The (B, H, T, S) weights for all heads at once, grouped heads read without copying k."""
        scores = dense_scores(q, k, scale, score_mod)  # (B, H, T, S)
        B, H, T, S = scores.shape
        allowed = dense_allowed(mask, B, H, T, S, device=q.device)  # (B|1, H|1, T, S)
        return self.normalise(scores, allowed, mask is None or mask.attends_self)

    def reference(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None
    ) -> tuple[Tensor, Tensor]:
        """out (B, H, T, d) and weights (B, H, T, S), one head at a time, as the paper writes it."""
        B, H, T, _ = q.shape
        H_kv, S = k.shape[1], k.shape[2]
        group = H // H_kv  # query heads sharing one key/value head (1 for MHA)
        allowed, attends_self = dense_allowed(mask, B, H, T, S, device=q.device), mask is None or mask.attends_self
        allowed = None if allowed is None else allowed.expand(B, H, T, S)
        bias = None if score_mod is None else score_mod.dense(T, S, num_heads=H, device=q.device, dtype=q.dtype)
        outputs, weights = [], []
        for h in range(H):
            q_h, k_h, v_h = q[:, h], k[:, h // group], v[:, h // group]  # (B, T, d), (B, S, d) x2
            allowed_h = None if allowed is None else allowed[:, h]  # (B, T, S)
            bias_h = None if bias is None else bias[:, h]  # (1, T, S): e.g. ALiBi's -m_h·|i - j|
            a = self.head_weights(q_h, k_h, scale, bias_h, allowed_h, attends_self, h)  # (B, T, S)
            outputs.append(a @ v_h)  # (B, T, d): output[i] = sum_j a[i, j] v[j]
            weights.append(a)
        return torch.stack(outputs, dim=1), torch.stack(weights, dim=1)

    def head_weights(
        self, q_h: Tensor, k_h: Tensor, scale: float, bias_h: Tensor | None, allowed_h: Tensor | None,
        attends_self: bool, head: int,
    ) -> Tensor:  # fmt: skip
        """One head's weights (B, T, S) from its queries (B, T, d) and keys (B, S, d): the paper's formula."""
        scores = q_h @ k_h.transpose(-2, -1) * scale  # (B, T, S): how well query i matches key j
        if bias_h is not None:
            scores = scores + bias_h
        return self.normalise(scores, allowed_h, attends_self, head=head)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        """The paper's weights from its math, written once and on its own: what the conformance kit proves every
        backend against, computed in float64. q (B, H, T, d) and k (B, H, S, d) (each query head with a copy of
        its key head), allowed (B, H, T, S) True where the mask lets the query see the key, the scale, the score
        bias (1, H, T, S) or None -> weights (B, H, T, S), 0 at every masked key and in a row that sees none.
        It reads the mechanism's parameters but never its `normalise`, `weights` or `reference`: a mistake
        there shows as a difference here."""
        raise NotImplementedError(
            f"mechanism '{self.name}' ({type(self).__module__}.{type(self).__qualname__}) has no formula(): the "
            "conformance kit has no math of its own to prove it against; implement Mechanism.formula"
        )

    @property
    def has_scores(self) -> bool:
        """Whether the weights are `normalise` of one (B, H, T, S) score map (the lens's hook_attn_scores):
        every mechanism but those, like differential attention, that form their weights otherwise."""
        return type(self).normalise is not Mechanism.normalise

    @property
    def label(self) -> str:
        """A name for this instance in logs and the kit's cells (its settings, where they matter)."""
        return self.name

    @classmethod
    def examples(cls, sizes: dict[str, Any]) -> list[Mechanism]:
        """Instances for the conformance kit (andrea.testing) to prove every backend that runs this mechanism
        against its reference, for a layer of `sizes`. A mechanism with settings worth covering overrides it.
        The kit draws every parameter at random first, so no parameter hides at its initial value."""
        return [cls(**sizes)]

    def extra_repr(self) -> str:
        return f"{self.name}"


def dense_scores(q: Tensor, k: Tensor, scale: float, score_mod: ScoreMod | None = None) -> Tensor:
    """q kᵀ · scale (+ the score bias) for all heads: q (B, H, T, d), k (B, H_kv, S, d) -> (B, H, T, S).
    Grouped heads view the H query heads as (H_kv, group) rather than copying k."""
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    q = (q * scale).view(B, H_kv, H // H_kv, T, d)  # (B, H_kv, group, T, d); scaling q is cheaper than T·S scores
    scores = (q @ k.unsqueeze(2).transpose(-2, -1)).view(B, H, T, S)  # (B, H_kv, group, T, S) -> (B, H, T, S)
    if score_mod is not None:
        scores = scores + score_mod.dense(T, S, num_heads=H, device=q.device, dtype=scores.dtype)  # (1, H, T, S)
    return scores


def scores_of(q: Tensor, k: Tensor, scale: float, bias: Tensor | None) -> Tensor:
    """The formulas' scores, s_ij = q_i·k_j · scale + bias_ij: q (B, H, T, d), k (B, H, S, d) -> (B, H, T, S)."""
    scores = q @ k.transpose(-2, -1) * scale
    return scores if bias is None else scores + bias


def softmax_of(scores: Tensor, allowed: Tensor) -> Tensor:
    """The formulas' softmax over the keys a query sees: exp(s_ij) / Σ_j' exp(s_ij'); a row that sees none is 0."""
    e = torch.exp(scores.masked_fill(~allowed, float("-inf")))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, 1.0)


def dense_allowed(mask: Mask | None, B: int, H: int, T: int, S: int, device: torch.device) -> Tensor | None:
    """The mask as booleans (B|1, H|1, T, S), True where a query may see a key; None where it masks nothing."""
    if mask is None or mask.is_full:
        return None
    return mask.dense(T, S, batch_size=B, num_heads=H, device=device)


def per_head(values: Tensor, head: int | None) -> Tensor:
    """A per-head parameter (H,) shaped to broadcast over scores: (1, H, 1, 1) for all heads, or one head's."""
    return values.view(1, -1, 1, 1) if head is None else values[head]


def finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
