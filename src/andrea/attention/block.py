"""MultiHeadSelfAttention (docs/spec.md §2): (B, T, D) -> (B, T, D) with any backend, mechanism, mask, head
config and in-attention position scheme (RoPE, ALiBi), with an optional KV cache for generation."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.advice import _alternatives
from andrea.attention.contract import UnsupportedAttentionError
from andrea.attention.heads import FusedQKV
from andrea.attention.kv_cache import KVCache
from andrea.attention.latent import LatentAttention, check_latent
from andrea.attention.masks import Mask, PrecomputedMask
from andrea.attention.masks.selected import Selected
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.base import dense_allowed, dense_scores
from andrea.attention.positions import ALiBi, Rotary
from andrea.attention.positions.temperature import QueryTemperature
from andrea.attention.registry import as_backend, as_mask, as_mechanism, as_selection
from andrea.attention.selection import Selection, SelectionSizes
from andrea.attention.shapes import weighted_values
from andrea.attention.spec import CONFIG_KEYS, AttentionSpec
from andrea.core.cache_size import CacheSize
from andrea.core.hook_points import HookPoint, Points

# how the block's refusals name its settings: a config's keys, but the network's own by their argument names
BLOCK_KEYS = CONFIG_KEYS | {key: key for key in ("d_model", "max_context", "position")}


def shared_parts(attention: dict[str, Any]) -> dict[str, Any]:
    """A block's settings with the backend and mask built once, for every layer of a network to share
    (a backend name and its `backend_options` become the backend; a mask expression, the Mask). The
    mechanism stays a spec: each layer builds its own, with its own parameters."""
    parts = dict(attention)
    parts["backend"] = as_backend(parts.get("backend", AttentionSpec.backend), parts.pop("backend_options", None))
    parts["mask"] = as_mask(parts.get("mask", AttentionSpec.mask))
    return parts


class MultiHeadSelfAttention(nn.Module):
    """Fused QKV projection -> [mechanism.project] -> attention backend -> [mechanism.combine] -> output
    projection W_O.

    backend: a registry name ("naive", "eager", "sdpa", "flex", or a plugin's) or an instance.
    mechanism: what runs between scores and values (andrea.attention.mechanisms): a registry name
             ("softmax", "sigmoid", ...), a mapping with its name and settings, or None (softmax).
             `layer` / `n_layer` place the block in its network (differential attention's λ_init).
    mask:    a Mask, a mask expression such as "causal & sliding_window(window=64)", a registry name with
             its fields ({"name": "sliding_window", "window": 64}), or None (no mask).
    position: "rope" rotates q and k, "alibi" biases the scores; anything else
              ("learned", "none") leaves attention position-free (the embedding's job).
              rope_base and rope_fraction: RoPE's base, and the share of each head it turns; rope_yarn: YaRN's
              stretch of it; temperature: the queries scaled up with log position (Llama 4's NoPE layers).
    latent:  multi-head latent attention's sizes (andrea.attention.latent: kv_rank, rope_dim, q_rank): keys and
             values from one latent per token, which is all the KV cache keeps; None: the fused QKV projection.
    selection: which of the keys the mask allows each query attends to, chosen from the data (andrea.attention.
             selection: "dsa", "moba", "nsa", a mapping with its name and settings); None or "none": all of them.
    A static mask is materialised once at `max_context` as a buffer and sliced per call.

    Hook points (andrea.core.hook_points; `hook_points()` lists this block's): hook_q, hook_k, hook_v as the
    projection gives them, hook_rot_q, hook_rot_k after RoPE, hook_attn_scores (the scaled, biased scores, masked
    keys at -inf), hook_pattern (the mechanism's weights), hook_z (the heads' outputs before W_O); with a selection,
    hook_selection_scores (what it ranks keys by: DSA's index scores, MoBA's block gates) and hook_selected (the
    keys it chose, (B, H or 1, T, S) booleans, within the mask; editing them changes what attention reads). With a
    function on the scores or the pattern, the block computes attention from the mechanism's dense form (what `eager`
    runs), so that what the function returns is what the values are weighted with, whatever the backend.
    """

    mask_buffer: Tensor  # (1, H or 1, L, L), registered only for a mask that does not depend on the batch

    def __init__(
        self, d_model: int, n_head: int, n_kv_head: int | None = None, *, layer: int = 0, n_layer: int = 1,
        **settings: Any,
    ) -> None:  # fmt: skip
        """`settings`: the rest of an AttentionSpec's (backend, mask, mechanism, position, latent, backend_options,
        max_context, bias, dropout), each with the spec's default; `layer` of `n_layer` places the block."""
        super().__init__()
        spec = AttentionSpec.read(dict(settings, d_model=d_model, n_head=n_head, n_kv_head=n_kv_head), BLOCK_KEYS)
        self.spec = spec.checked(BLOCK_KEYS)
        self.heads, self.d_model, self.max_context = spec.heads, d_model, spec.max_context
        self.head_dim = spec.width
        self.backend, self.mask = as_backend(spec.backend, spec.backend_options), as_mask(spec.mask)
        self.position, self.score_mod = spec.position, ALiBi(n_head) if spec.position == "alibi" else None
        sizes = dict(n_head=n_head, head_dim=self.head_dim, d_model=d_model, max_context=spec.max_context)
        sizes |= dict(n_kv_head=self.heads.n_kv_head)
        place = dict(layer=layer, n_layer=n_layer, projection_bias=spec.bias)
        self.mechanism: Mechanism = as_mechanism(spec.mechanism, sizes | place)
        # Refuse an impossible backend/mask/position/mechanism combination now, not at the first batch; what
        # depends on the device (a GPU-only kernel) is checked in forward, where the device is known.
        self.backend.checked(self.mask, self.mechanism, self.score_mod, device=None, needs_grad=False,
                             head_dim=self.head_dim)  # fmt: skip
        check_extended(self.heads.n_kv_head, n_head, self.backend, self.mechanism)
        self._inputs(spec)
        self.selection: Selection | None = as_selection(spec.selection, self._selection_sizes(spec))
        if self.selection is not None:  # a backend that cannot follow a chosen set of keys, refused now
            self.backend.checked(Selected.examples(1, 2)[0], self.mechanism, self.score_mod, device=None,
                                 needs_grad=False, head_dim=self.head_dim)  # fmt: skip
        self.proj = nn.Linear(n_head * self.head_dim, d_model, bias=spec.bias)  # W_O: mixes the heads
        self.dropout = nn.Dropout(spec.dropout)
        self.points = Points(POINTS)
        if not self.mask.batch_dependent:
            # (1, 1, L, L) True = attend; not a parameter, not saved in checkpoints, moves with .to()
            dense = self.mask.dense(spec.max_context, spec.max_context, num_heads=n_head)
            self.register_buffer("mask_buffer", dense, persistent=False)

    def _inputs(self, spec: AttentionSpec) -> None:
        """The heads' inputs, one of two parts with the same calls (FusedQKV): W_Q, W_K, W_V fused, or latent
        attention's projections. RoPE rotates each head, or each of the heads a mechanism's head holds
        (differential attention's halves); latent attention turns only its decoupled part."""
        rope = None
        if spec.position == "rope":
            parts = self.mechanism.rope_parts
            rope = Rotary(
                self.head_dim, spec.rope_base, parts, spec.rope_fraction, spec.rope_yarn, spec.rope_interleaved
            )
        temperature = None if spec.temperature is None else QueryTemperature(**spec.temperature)
        self.qkv: FusedQKV | None = None
        self.latent: LatentAttention | None = None
        if spec.latent is None:
            self.qkv = FusedQKV(spec.d_model, self.heads, self.head_dim, spec.bias, rope, temperature)
            return
        settings = {str(key): value for key, value in spec.latent.items()}
        self.latent = LatentAttention(
            spec.d_model,
            spec.n_head,
            self.head_dim,
            **settings,
            rope=rope is not None,
            bias=spec.bias,
            rope_base=spec.rope_base,
        )
        check_latent(self.heads, self.backend, self.mechanism)

    def _selection_sizes(self, spec: AttentionSpec) -> SelectionSizes:
        """What the layer tells its selection: heads=mla's query latent c_Q, where it has one, for DSA's indexer."""
        latent = self.latent
        q_down = None if latent is None else latent.q_down
        return SelectionSizes(
            d_model=spec.d_model, n_head=spec.n_head, kv_heads=self.heads.n_kv_head, head_dim=self.head_dim,
            rope=spec.position == "rope",
            rope_base=spec.rope_base, rope_dim=None if latent is None else latent.rope_dim,
            query_latent=None if latent is None or q_down is None else latent.query_latent,
            query_width=spec.d_model if q_down is None else q_down.out_features,
            scale=self._scale() or 1.0 / math.sqrt(self.head_dim),
            max_context=spec.max_context, scores_problem=self._scores_problem(),
        )  # fmt: skip

    def _scores_problem(self) -> str | None:
        """Why this layer's weights are not softmax(q·k · scale), or None: what a selection that learns from them
        (DSA's indexer) asks."""
        if self.mechanism.kernel != "softmax":
            return f"mechanism={self.mechanism.name}"
        return "position=alibi" if self.score_mod is not None else None

    @property
    def inputs(self) -> FusedQKV | LatentAttention:
        """The part that turns x into the heads' queries, keys and values."""
        inputs = self.qkv or self.latent
        assert inputs is not None  # the constructor sets one
        return inputs

    def forward(
        self, x: Tensor, mask: Mask | None = None, return_weights: bool = False, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) -> y (B, T, D) and, with return_weights, the weights (B, H, T, S), else None.

        `mask`, when given, is combined (AND) with the block's own mask: per-batch
        key padding or packed-document ids. With a `cache`, x holds only the new
        tokens; they attend to the S - T cached ones too, and join the cache.
        """
        B, T, D = x.shape
        self._check_input(T, D)
        full_mask = self._mask() if mask is None else self._mask() & mask
        # refused before any tensor work (the backend's call checks again, in the same few comparisons)
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or self.proj.weight.requires_grad)
        self.backend.checked(full_mask, self.mechanism, self.score_mod, device=x.device, needs_grad=needs_grad)

        start = 0 if cache is None else cache.next_position  # absolute position of x's first token
        # (B, H, T, d), (B, H_kv, S, d) x2: S counts the cached tokens too
        q, k, v = self.inputs.project(x, start, cache, self.points, self.mechanism)
        if self.selection is None:
            y, weights = self._attend(q, k, v, full_mask, return_weights)
        else:
            chosen = self._select(x, q, k, full_mask, start, cache)
            attend = functools.partial(self._attend, q, k, v)
            y, weights = self.selection.attend(attend, q, v, chosen, return_weights)
        if cache is not None:
            cache.trim()
        y = self.inputs.finish(y, cache)  # (B, H, T, d): latent attention's absorbed form up-projected
        y = self.mechanism.combine(y, x)  # (B, H, T, d): e.g. the output gate, differential attention's norm
        y = self.points["hook_z"](y.transpose(1, 2))  # (B, T, H, d): what W_O reads, where ablations act
        y = y.contiguous().view(B, T, -1)  # (B, T, H, d) -> (B, T, H·d): heads side by side
        y = self.dropout(self.proj(y))  # (B, T, D)
        return y, weights if return_weights else None

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Mask, return_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """The backend's attention, or, with a function on the scores or the pattern, the mechanism's dense form."""
        scale = self._scale()
        if self.points["hook_attn_scores"].fns or self.points["hook_pattern"].fns:
            return self._attention_in_the_open(q, k, v, mask, scale)
        return self.backend(
            q, k, v, mask=mask, scale=scale, need_weights=return_weights, score_mod=self.score_mod,
            mechanism=self.mechanism,
        )  # fmt: skip

    def _scale(self) -> float | None:
        """The score scale: latent attention's, or the mechanism's; None: the contract's 1/sqrt(d)."""
        return self.inputs.scale or self.mechanism.scale()

    def _select(self, x: Tensor, q: Tensor, k: Tensor, mask: Mask, start: int, cache: KVCache | None) -> Selected:
        """The keys the selection chooses among those `mask` allows, as the mask attention then runs under."""
        assert self.selection is not None
        B, H, T, _ = q.shape
        S = k.shape[2]
        allowed = dense_allowed(mask, B, H, T, S, device=q.device)
        if allowed is None:
            allowed = torch.ones(1, 1, T, S, dtype=torch.bool, device=q.device)
        params = mask.params()
        documents = None if params is None else params.document_ids  # (B, S or more): where the mask packs them
        chosen = self.selection(x, q, k, allowed, start, cache, self.points, documents)
        return Selected(self.points["hook_selected"](chosen) & allowed)

    def _check_input(self, T: int, D: int) -> None:
        if self.d_model != D:
            raise ValueError(f"input has d_model={D}, the block was built for {self.d_model}")
        if self.max_context < T:
            raise ValueError(f"sequence length {T} exceeds max_context={self.max_context}; raise max_context")

    def _attention_in_the_open(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Mask, scale: float | None
    ) -> tuple[Tensor, Tensor]:
        """The mechanism's dense form with its scores and weights passed through their hook points:
        q (B, H, T, d), k (B, H_kv, S, d), v (B, H_kv, S, d_v) -> out (B, H, T, d_v), weights (B, H, T, S)."""
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        if self.mechanism.has_scores:
            scores = dense_scores(q, k, scale, self.score_mod)  # (B, H, T, S)
            B, H, T, S = scores.shape
            allowed = dense_allowed(mask, B, H, T, S, device=q.device)  # (B|1, H|1, T, S) or None
            shown = scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))
            shown = self.points["hook_attn_scores"](shown)
            weights = self.mechanism.normalise(shown.clone(), allowed, mask.attends_self)  # normalise may write
        else:  # two maps (differential attention): only the weights have one (B, H, T, S) form
            weights = self.mechanism.weights(q, k, mask, scale, self.score_mod)
        weights = self.points["hook_pattern"](weights)  # (B, H, T, S)
        return weighted_values(weights, v), weights

    def hook_points(self) -> dict[str, HookPoint]:
        """This block's hook points by name, those its configuration has (RoPE's, scores where the mechanism
        forms one score map); a network lists them under `blocks.<layer>.attn.`."""
        skip = self.inputs.skipped_points() | (set() if self.mechanism.has_scores else {"hook_attn_scores"})
        skip |= set() if self.selection is not None else {"hook_selection_scores", "hook_selected"}
        return {name: point for name, point in self.points.items() if name not in skip}

    def _mask(self) -> Mask:
        if hasattr(self, "mask_buffer"):
            return PrecomputedMask(self.mask, self.mask_buffer)
        return self.mask

    def allowed(self, T: int) -> Tensor:
        """(H or 1, T, T) True where a query may see a key, read from the layer's own buffer (a mask of the batch's:
        built from the mask for one sequence)."""
        return self._mask().dense(T, T)[0]

    def per_head_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """W_Q^h (H, D, d), W_K^h and W_V^h (H_kv, D, d): the per-head view of the fused projection."""
        return self.inputs.per_head_weights()

    def load_per_head_weights(self, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> None:
        self.inputs.load_per_head_weights(w_q, w_k, w_v)

    def extra_repr(self) -> str:
        h = self.heads
        return (
            f"d_model={self.d_model}, n_head={h.n_head}, n_kv_head={h.n_kv_head} ({self.head_kind}), "
            f"backend={self.backend.name}, mask={self.mask.name}, max_context={self.max_context}, "
            f"mechanism={self.mechanism.name}"
            + (", rope" if self.position == "rope" else ", alibi" if self.position == "alibi" else "")
            + ("" if self.selection is None else f", selection={self.selection.name}")
        )

    def new_cache(self) -> KVCache:
        """An empty cache for this layer, bounded when the mask's look-back is."""
        return self.inputs.new_cache(self.mask.max_lookback)

    @property
    def head_kind(self) -> str:
        """mha, gqa, mqa, or mla (latent attention)."""
        return self.inputs.kind

    def cache_width(self) -> int:
        """Numbers the KV cache keeps per token for this layer: 2·H_kv·d, or latent attention's r + d_R, and what a
        selection keeps beside them (DSA's index key, d_I)."""
        return self.inputs.cache_width() + (0 if self.selection is None else self.selection.cache_width)

    def cache_size(self) -> CacheSize:
        """What this layer's cache keeps for a sequence (the token-mixer interface, andrea.mixers.base)."""
        return CacheSize(self.cache_width(), max_tokens=self.mask.max_lookback)


# hook points of a block, in the order a forward pass reaches them
POINTS = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_selection_scores", "hook_selected",
          "hook_attn_scores", "hook_pattern", "hook_z")  # fmt: skip


def check_extended(n_kv_head: int, n_head: int, backend: object, mechanism: Mechanism) -> None:
    """A mechanism that appends channels to q and k (Mechanism.extend: forgetting attention's gate) needs a backend
    whose values may be narrower than its keys, and a key head per query head: refused in one line otherwise."""
    if not mechanism.extra_channels:
        return
    capabilities = getattr(backend, "capabilities", None)
    if capabilities is not None and not capabilities.distinct_value_dim:
        name = getattr(backend, "name", type(backend).__name__)
        raise UnsupportedAttentionError(
            f"attention backend '{name}' needs values of the keys' size, and mechanism={mechanism.name} carries "
            f"{mechanism.extra_channels} more channel in q and k; use {_alternatives(lambda c: c.distinct_value_dim)}"
        )
    if n_kv_head != n_head:
        raise ValueError(
            f"mechanism={mechanism.name} keeps one gate per head in its keys, and heads.n_kv_head={n_kv_head} key "
            f"heads serve heads.n_head={n_head} query heads; use heads=mha"
        )
