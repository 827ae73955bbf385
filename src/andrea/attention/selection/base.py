"""The selection contract: which keys each query attends to, chosen from the data before attention runs.

A layer's mask says which keys a query may see; a selection (`selection=` in a config: dsa, moba, nsa) then keeps
some of them, from the queries, keys and input it reads, and attention runs over exactly those (the layer ANDs
them with its mask as andrea.attention.masks.Selected, which every backend that reads a batch's mask follows):

    selection(x, q, k, allowed, start, cache, points, documents) -> chosen (B, H or 1, T, S) bool
        x (B, T, D) the layer's input; q (B, H, T, d), k (B, H_kv, S, d) what the backend will attend with (the
        absorbed form's, with a latent cache: scores in either form are the same numbers); allowed (B or 1,
        H or 1, T, S) what the mask lets each query see; start the position of x's first token; cache the
        layer's KV cache (a selection keeps what it needs of past tokens there), or None; points the layer's
        hook points (hook_selection_scores, hook_selected); documents (B, S) the document id of every key where
        the mask packs documents (its params()), else None

    selection.attend(attend, q, v, chosen, need_weights) -> (out, weights or None)
        what the layer's heads give from the chosen keys: attention over them, attend(chosen, need_weights), for
        DSA and MoBA; NSA mixes it with branches of its own (a window's attention, a compressed view's) through
        gates, and its weights are the heads' over the keys, every branch's together

    selection.keep_every_key(length)   set itself to keep every key of sequences of `length` (the kit's check)
    selection.attend_chosen_only()     set itself to give attention over the chosen keys alone, no branch of its
                                       own (the kit's check; a no-op where that is all it gives)

A selection is built per layer, `cls(sizes, **settings)`: sizes the layer's (SelectionSizes), settings from the
`selection` config group. What it returns outside the mask is dropped (the layer ANDs it with the mask). The
conformance kit (andrea.testing.selection_checks) proves every registered selection, a plugin's too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from andrea.attention.kv_cache import KVCache
from andrea.attention.masks.base import Mask
from andrea.core.hook_points import HookPoint


@dataclass(frozen=True)
class SelectionSizes:
    """What a layer tells its selection about itself."""

    d_model: int
    n_head: int
    kv_heads: int  # heads with keys of their own in the layer's math (latent heads: n_head)
    head_dim: int
    rope: bool  # whether the layer turns its queries and keys with RoPE
    rope_base: float
    rope_dim: int | None  # latent attention's decoupled key width (heads=mla), else None
    query_latent: Callable[[Tensor], Tensor] | None  # heads=mla's c_Q = RMSNorm(W_DQ x) (q_rank), else None
    query_width: int  # the width of what query_latent gives, or d_model
    scale: float  # the layer's attention scale (q·k · scale): what a selection's own loss reads the heads with
    max_context: int  # the longest sequence the layer sees
    scores_problem: str | None  # why the heads' weights are not softmax(q·k · scale) ("mechanism=sigmoid"), or None


class Selection(nn.Module):
    """Which of the keys a layer's mask allows each query attends to, chosen from the data (the contract above):
    a subclass writes `forward` and `keep_every_key`, and declares `shared_by_heads`, `kit_settings` and what it
    keeps in the KV cache a token (`cache_width`)."""

    name: ClassVar[str]
    shared_by_heads: ClassVar[bool]  # one choice for every head (DSA) or one a head (MoBA)
    kit_settings: ClassVar[dict[str, Any]] = {}  # the conformance kit's small layer's (21 tokens): keys left out
    cache_width: int = 0  # numbers it keeps in the KV cache a token (DSA's index key)

    def forward(
        self, x: Tensor, q: Tensor, k: Tensor, allowed: Tensor, start: int, cache: KVCache | None,
        points: Mapping[str, HookPoint], documents: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        raise NotImplementedError

    def attend(
        self, attend: Callable[[Mask, bool], tuple[Tensor, Tensor | None]], q: Tensor, v: Tensor, chosen: Mask,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """The heads' output (B, H, T, d_v) from the keys chosen, and their weights (B, H, T, S) if asked: attention
        over exactly the chosen keys, through the layer's backend (`attend(mask, need_weights)`)."""
        del q, v  # a selection with branches of its own reads them
        return attend(chosen, need_weights)

    def attend_chosen_only(self) -> None:
        """Give attention over the chosen keys alone (what `attend` gives unless a selection mixes in branches of
        its own): the conformance kit then holds the layer equal to dense attention over those keys."""

    def keep_every_key(self, length: int) -> None:
        """Set itself to keep every key the mask allows in sequences of `length` (DSA: topk = length): the
        conformance kit then holds the layer equal to dense attention."""
        raise NotImplementedError(f"selection {self.name} does not say how it keeps every key: write keep_every_key")
