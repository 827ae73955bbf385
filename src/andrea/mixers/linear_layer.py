"""The layer around gated linear attention (andrea.ops.gated_linear), what linear attention and GLA share:

    x (B, T, D) -> q, k (B, H, T, K), v (B, H, T, V) by projections [-> short causal conv + SiLU]
                -> the mixer's features (a feature map, RoPE) and log decay g
                -> o = the recurrence in the chosen form (mixer.form), from the cache's state when generating
                -> [per-head RMSNorm] [times swish(W_g x)] -> hook_z (B, T, H, V) -> W_O -> y (B, T, D)

A subclass says what is its own: `features(q, k, start)`, `log_decay(x)` (None: no decay), the layer's defaults
and its recurrence written on its own, `reference` (andrea.mixers.linear_reference). With `normalize`, o is
divided by the same recurrence run on a column of ones (φ(q)·Σ φ(k), decayed alike), so the normaliser lives in
the state too and generation keeps it. Hook points: hook_q, hook_k, hook_v as the heads see them (after the
features), hook_decay (g), hook_pattern (the implied weights, when asked for), hook_state (the state after the
call's last token: what a cache keeps, so an edit there changes what generation reads next), hook_gate (the output
gate, swish(W_g x) or the mixer's `gate_activation`), hook_z; the network lists them under `blocks.<layer>.attn.`
(docs/lens.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.core.hook_points import HookPoint, Points
from andrea.mixers.base import CacheSize
from andrea.mixers.short_conv import ShortConv
from andrea.mixers.state_cache import StateCache
from andrea.mixers.state_masks import StateMask, call_mask
from andrea.ops import gated_linear
from andrea.utils.rules import Rule, SettingError, one_of

POINTS = ("hook_q", "hook_k", "hook_v", "hook_decay", "hook_pattern", "hook_state", "hook_gate", "hook_z")
EPS = 1e-6  # the normaliser's floor


def check_form_and_heads(form: str, n_head: object, d_model: int, width: str = "d_model") -> None:
    """A form the recurrence has, and heads that split the width (named `width`) evenly."""
    if form not in gated_linear.FORMS:
        raise SettingError("mixer.form", f"={form!r} is not one of {', '.join(gated_linear.FORMS)}")
    if not isinstance(n_head, int) or isinstance(n_head, bool) or n_head <= 0 or d_model % n_head:
        raise SettingError("mixer.n_head", f"={n_head!r} must be a positive integer dividing {width}={d_model}")


class LinearMixer(nn.Module):
    name: ClassVar[str]
    forms: ClassVar[tuple[str, ...]] = gated_linear.FORMS  # mixer.form (the conformance kit runs each)
    kit_settings: ClassVar[tuple[dict[str, Any], ...]] = ()  # settings the kit proves as rows of their own too
    setting_rules: ClassVar[dict[str, Rule]] = {"form": one_of(*gated_linear.FORMS)}  # andrea.mixers.settings
    signed: bool = True  # whether an implied weight can be negative (the maps' colour scale)
    gate_activation: Callable[[Tensor], Tensor] = staticmethod(F.silu)  # swish(W_g x) (Kimi Delta Attention: sigmoid)

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, key_dim: int | None = None, value_dim: int | None = None,
        form: str = "chunked", chunk: int = gated_linear.CHUNK, conv: bool = False, gate: bool = False,
        norm: bool = False, normalize: bool = False, norm_eps: float = 1e-5,
    ) -> None:  # fmt: skip
        """key_dim, value_dim: each head's K and V (None: d_model / n_head); norm_eps: the output RMSNorm's eps."""
        super().__init__()
        check_form_and_heads(form, n_head, d_model)
        H, K, V = n_head, key_dim or d_model // n_head, value_dim or d_model // n_head
        self.n_head, self.key_dim, self.value_dim, self.form, self.chunk = H, K, V, form, chunk
        self.normalize, self.layer = normalize, layer
        self.q_proj, self.k_proj = nn.Linear(d_model, H * K, bias=bias), nn.Linear(d_model, H * K, bias=bias)
        self.v_proj = nn.Linear(d_model, H * V, bias=bias)
        widths = {"q": H * K, "k": H * K, "v": H * V}
        self.convs = nn.ModuleDict({s: ShortConv(w) for s, w in widths.items()}) if conv else None
        self.gate: nn.Module | None = nn.Linear(d_model, H * V, bias=bias) if gate else None  # the output gate
        self.norm = nn.RMSNorm(V, eps=norm_eps) if norm else None  # per head, over its V channels
        self.proj = nn.Linear(H * V, d_model, bias=bias)  # W_O
        self.dropout = nn.Dropout(dropout)
        self.points = Points(POINTS)

    @property
    def scale(self) -> float:
        return self.key_dim**-0.5

    @property
    def rows_sum_to_one(self) -> bool:
        """The maps' reading (andrea.models.weight_styles): normalised weights are a distribution per row."""
        return self.normalize

    @property
    def decays(self) -> bool:
        """Whether the state decays: a subclass that writes its own `log_decay` has a decay (GLA, retention, Gated
        DeltaNet), one that keeps the layer's has none (linear attention, DeltaNet)."""
        return type(self).log_decay is not LinearMixer.log_decay

    @property
    def scores_meaning(self) -> str:
        """The implied weights' q·k, named with the decay they are under, or that there is none."""
        return "decay-masked q·k" if self.decays else "q·k with no decay"

    @property
    def weights_meaning(self) -> str:
        """What an implied weight is: the maps' subtitle (andrea.models.weight_styles)."""
        if self.normalize:
            return "implied weights: φ(q)·φ(k) normalised (each row sums to 1)"
        share = "each earlier token's share of the output (rows need not sum to 1)"
        return f"implied weights: {self.scores_meaning}, {share}"

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """q, k (B, H, T, K) at positions start.. as the recurrence reads them (a feature map, RoPE)."""
        return q, k

    def log_decay(self, x: Tensor) -> Tensor | None:
        """The log decay g <= 0 per token, (B, H, T, K) or (B, H, T); None: no decay (plain linear attention)."""
        return None

    def forward(
        self, x: Tensor, mask: Mask | None = None, return_weights: bool = False, cache: StateCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`mask`: packed documents or key padding (andrea.mixers.state_masks), as an attention block takes it."""
        where = call_mask(mask, x.shape[1], cache, self.name)
        q, k, v, g = self._inputs(x, cache, where)
        if cache is not None:
            cache.document = where.last
        want = return_weights or bool(self.points["hook_pattern"].fns)
        o, weights = self._mix(x, (q, k, v, g), cache, where.seg, want)
        return self._output(o, x), weights if return_weights else None

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The layer as its paper writes it, one token at a time from a zero state: what the conformance kit proves
        every form against (andrea.testing.mixer_checks, in float64 on a copy). Each mixer writes its own, on its
        parameters and one token at a time (andrea.mixers.linear_reference), never calling `features`,
        `log_decay`, `recur` or the forms: a mistake there, such as a decay that reads a later token, then shows
        as a difference instead of being repeated on both sides."""
        raise NotImplementedError(
            f"mixer '{self.name}' ({type(self).__module__}.{type(self).__qualname__}) has no reference(): the "
            "conformance kit has no recurrence of its own to prove its forms against; write reference(x, mask) "
            "from its paper, one token at a time (andrea.mixers.linear_reference, docs/write_a_mixer.md)"
        )

    def _inputs(
        self, x: Tensor, cache: StateCache | None, where: StateMask
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """q, k (B, H, T, K), v (B, H, T, V) as the heads read them and the log decay g, padding's keys zeroed."""
        q, k, v = self._streams(x, cache, where.seg)
        q, k = self.features(q, k, 0 if cache is None else cache.position)
        q, k, v = self.points["hook_q"].heads(q), self.points["hook_k"].heads(k), self.points["hook_v"].heads(v)
        g = self.log_decay(x)
        g = None if g is None else self.points["hook_decay"](g)
        k, g = where.keys(k, g)
        return q, k, v, g

    def _output(self, o: Tensor, x: Tensor) -> Tensor:
        """o (B, H, T, V) -> [per-head RMSNorm] [times swish(W_g x)] -> hook_z -> W_O -> y (B, T, D)."""
        B, T, _ = x.shape
        o = o.to(x.dtype) if self.norm is None else self.norm(o.to(x.dtype))
        o = o.transpose(1, 2)  # (B, T, H, V)
        if self.gate is not None:
            o = o * self.points["hook_gate"](self.gate_activation(self.gate(x)).view(B, T, self.n_head, self.value_dim))
        o = self.points["hook_z"](o).reshape(B, T, -1)
        return self.dropout(self.proj(o))

    def _streams(self, x: Tensor, cache: StateCache | None, seg: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """q, k (B, H, T, K) and v (B, H, T, V): the projections, through the short convolution when there is one."""
        streams = {"q": self.q_proj(x), "k": self.k_proj(x), "v": self.v_proj(x)}
        if self.convs is not None:
            for name, conv in self.convs.items():
                streams[name], kept = conv(streams[name], None if cache is None else cache.conv.get(name), seg)
                if cache is not None:
                    cache.conv[name] = kept
        return self.to_heads("q", streams["q"]), self.to_heads("k", streams["k"]), self.to_heads("v", streams["v"])

    def to_heads(self, stream: str, u: Tensor) -> Tensor:
        """A stream's projection (B, T, H·d) into heads: (B, H, T, d)."""
        return u.view(*u.shape[:2], self.n_head, -1).transpose(1, 2)

    def recur(
        self, x: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, state: Tensor | None, seg: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """The recurrence in the layer's form from `state`: (o, the final state). The gated linear one here; a
        mixer with another (the delta rule) overrides it and `implied`, reading what else it needs from x."""
        return gated_linear.run(self.form, q, k, v, g, self.scale, state, seg, chunk=self.chunk)

    def implied(self, x: Tensor, q: Tensor, k: Tensor, g: Tensor | None, seg: Tensor | None) -> Tensor:
        """The implied weights (B, H, T, T) of the recurrence `recur` runs."""
        return gated_linear.weights(q, k, g, self.scale, seg)

    def _mix(
        self, x: Tensor, heads: tuple[Tensor, Tensor, Tensor, Tensor | None], cache: StateCache | None,
        seg: Tensor | None, want_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """The recurrence in the layer's form, from the cache's state; o (B, H, T, V), and the implied weights."""
        q, k, v, g = heads
        if self.normalize:  # a column of ones: its output is the normaliser, φ(q)·Σ φ(k)
            v = torch.cat((v, torch.ones_like(v[..., :1])), dim=-1)
        o, state = self.recur(x, q, k, v, g, None if cache is None else cache.state, seg)
        state = self.points["hook_state"](state)  # (B, H, K, V[+1]): with the normaliser, its column last
        if cache is not None:
            cache.state, cache.position = state, cache.position + q.shape[2]
        if self.normalize:
            o = o[..., :-1] / o[..., -1:].clamp_min(EPS)
        weights = None
        if want_weights and cache is None:
            weights = self.implied(x, q, k, g, seg)
            weights = weights / weights.sum(-1, keepdim=True).clamp_min(EPS) if self.normalize else weights
            weights = self.points["hook_pattern"](weights.to(q.dtype))
        return o.to(q.dtype), weights

    def new_cache(self) -> StateCache:
        return StateCache()

    def hook_points(self) -> dict[str, HookPoint]:
        return dict(self.points)

    def cache_size(self) -> CacheSize:
        """A fixed state: H·K·V numbers (one more value column with the normaliser), and the convolution's last
        inputs."""
        values = self.value_dim + self.normalize
        convs = [] if self.convs is None else [c for c in self.convs.values() if isinstance(c, ShortConv)]
        conv = sum((c.kernel_size[0] - 1) * c.in_channels for c in convs)
        return CacheSize(per_token=0, per_sequence=self.n_head * self.key_dim * values + conv, conv=conv)

    def extra_repr(self) -> str:
        return (
            f"{self.name}, n_head={self.n_head}, key_dim={self.key_dim}, value_dim={self.value_dim}, form={self.form}"
        )
