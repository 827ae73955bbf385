"""RWKV-7's time mixing (Peng et al. 2025, "RWKV-7 'Goose' with Expressive Dynamic State Evolution"): a state
whose transition is a decay per key channel plus a rank-one removal along a normalised key, the delta rule
generalised (andrea.ops.dplr),

    x_s = x_t + (x_{t-1} - x_t) ⊙ μ_s         the token shift (andrea.mixers.token_shift), one mix a stream s
    r_t, k_t, v_t = W_r x_r, W_k x_k, W_v x_v
    w_t = exp(-e^{-1/2} sigmoid(w_0 + tanh(x_w W_w↓) W_w↑))     the decay per key channel, in (0.545, 1)
    a_t = sigmoid(a_0 + x_a W_a↓ W_a↑)         the in-context learning rate per key channel
    g_t = sigmoid(x_g W_g↓) W_g↑               the output gate
    κ̂_t = normalize(k_t ⊙ k_k) per head        the removal key
    k_t ← k_t ⊙ (1 + (a_t - 1) ⊙ k_a)          the replacement key
    S_t = (diag(w_t) - (a_t ⊙ κ̂_t) κ̂_tᵀ) S_{t-1} + k_t v_tᵀ       S (K, V) a head, K = V = d_model / n_head
    o_t = GroupNorm(S_tᵀ r_t) + (r_t · (k_t ⊙ r_k)) v_t            per head; the second term the current token's bonus
    y_t = W_o (g_t ⊙ o_t)

so the recurrence is andrea.ops.dplr's with a = -κ̂, b = κ̂ ⊙ a, g = log w and scale 1, in each of its forms.
Initialised as fla's RWKV7Attention and the paper's code do, by the layer's depth (`_init_as_published`); the
low-rank projections are parameters of their own (not Linears, so the network's initialisation of its Linears
leaves their published values). The GroupNorm's eps is head_dim · norm_eps, as published.

Two differences from the published layer: RWKV-7's value residual (every layer after the first mixes its values
toward the first layer's, v_first, by a learned low-rank lerp) needs a stream between layers, and a mixer sees
only its own layer's input (andrea.mixers.base), so the layer here has no v_first; and in a network its r, k, v
and output projections take the network's initialisation of its Linears (andrea.models.gpt), as every mixer's
do, where RWKV-7 starts them orthogonal (k at gain 0.1) and the output at zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.core.hook_points import HookPoint, Points
from andrea.mixers.base import CacheSize
from andrea.mixers.linear_layer import POINTS, check_form_and_heads
from andrea.mixers.state_cache import StateCache
from andrea.mixers.state_masks import StateMask, call_mask
from andrea.mixers.token_shift import token_shift
from andrea.mixers.token_steps import tokens
from andrea.ops import dplr
from andrea.utils.rules import Rule, one_of

DECAY = math.exp(-0.5)  # log w = -e^{-1/2} sigmoid(·): RWKV-7's bound on a token's decay
STREAMS = ("r", "w", "k", "v", "a", "g")  # the token shift's mixes, one a stream


def low_rank_dim(d_model: int, scale: float, head_dim: int | None = None) -> int:
    """RWKV-7's rank for a low-rank projection: max(32, scale · sqrt(d_model) rounded to a multiple of 32), times
    head_dim / 64 for the decay's and the learning rate's (fla's RWKV7Attention)."""
    factor = 1.0 if head_dim is None else head_dim / 64
    return max(32, int(round(scale * d_model**0.5 * factor / 32) * 32))


class LowRank(nn.Module):
    """x -> activation(x W↓) W↑ [+ bias]: RWKV-7's low-rank projections, W↓ zeros and W↑ orthogonal times 0.1 as
    published."""

    def __init__(self, d_in: int, rank: int, d_out: int, activation: Callable[[Tensor], Tensor], bias: bool) -> None:
        super().__init__()
        self.down = nn.Parameter(torch.zeros(d_in, rank))
        up = torch.empty(rank, d_out)
        self.up = nn.Parameter(nn.init.orthogonal_(up, gain=0.1 * (math.sqrt(rank / d_out) if rank > d_out else 1)))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        y = self.activation(x @ self.down) @ self.up
        return y if self.bias is None else y + self.bias


class RWKV7(nn.Module):
    name = "rwkv7"
    forms = dplr.FORMS  # mixer.form (the conformance kit runs each)
    setting_rules: ClassVar[dict[str, Rule]] = {"form": one_of(*dplr.FORMS)}  # andrea.mixers.settings
    signed = True  # r·k and the removals: a weight can be negative
    rows_sum_to_one = False
    weights_meaning = (
        "implied weights of the state: r·k under the decay and each later removal along κ̂, before the GroupNorm "
        "and the current token's bonus; each earlier token's share of the output (rows need not sum to 1)"
    )

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, form: str = "chunked", chunk: int = dplr.CHUNK,
        decay_low_rank_dim: int | None = None, a_low_rank_dim: int | None = None,
        gate_low_rank_dim: int | None = None, gate: bool = True, norm: bool = True, norm_eps: float = 1e-5,
    ) -> None:  # fmt: skip
        """*_low_rank_dim: the ranks of the decay's, the learning rate's and the gate's projections (None:
        RWKV-7's, low_rank_dim); gate, norm: the output gate g and the per-head GroupNorm, on as published."""
        super().__init__()
        check_form_and_heads(form, n_head, d_model)
        H = n_head
        K = d_model // H
        self.n_head, self.key_dim, self.value_dim, self.form, self.chunk = H, K, K, form, chunk
        self.streams = STREAMS if gate else STREAMS[:-1]  # the gate's stream only with the gate
        for stream in self.streams:  # μ_s
            self.register_parameter(f"x_{stream}", nn.Parameter(torch.zeros(d_model)))
        self.k_k, self.k_a, self.r_k = (nn.Parameter(torch.zeros(d_model)) for _ in range(3))
        self.r_proj, self.k_proj = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        ranks = (decay_low_rank_dim or low_rank_dim(d_model, 2.5, K), a_low_rank_dim or low_rank_dim(d_model, 2.5, K))
        self.w_lora = LowRank(d_model, ranks[0], d_model, torch.tanh, bias=True)  # its bias is w_0
        self.a_lora = LowRank(d_model, ranks[1], d_model, nn.Identity(), bias=True)  # its bias is a_0
        rank = gate_low_rank_dim or low_rank_dim(d_model, 5.0)
        self.g_lora = LowRank(d_model, rank, d_model, torch.sigmoid, bias=False) if gate else None
        self.norm = nn.GroupNorm(H, d_model, eps=K * norm_eps) if norm else None
        self.proj = nn.Linear(d_model, d_model, bias=bias)  # W_O
        self.dropout = nn.Dropout(dropout)
        self.points = Points(POINTS)
        self._init_as_published(layer, n_layer, d_model)

    @torch.no_grad()
    def _init_as_published(self, layer: int, n_layer: int, D: int) -> None:
        """The mixes, decay, learning rate, keys' scales and norm by the layer's depth, as fla's RWKV7Attention
        initialises them (after the paper's code)."""
        K = self.key_dim
        deep = layer / (n_layer - 1) if n_layer > 1 else 0.0  # 0 at the first layer, 1 at the last
        shallow = 1.0 - layer / n_layer  # 1 at the first layer, toward 0
        n = torch.arange(D, dtype=torch.float64)
        linear = n / (D - 1) - 0.5 if D > 1 else n * 0
        zigzag = ((n % K) - (K - 1) / 2) / ((K - 1) / 2) if K > 1 else n * 0
        zigzag = zigzag * zigzag.abs()
        for stream, power in zip(self.streams, (0.2, 0.9, 0.7, 0.7, 0.9, 0.2), strict=False):
            getattr(self, f"x_{stream}").copy_(1.0 - (n / D) ** (power * shallow))
        decay = -6 + 6 * (n / max(D - 1, 1)) ** (1 + deep**0.3)
        self.w_lora.bias.copy_(decay + 0.5 + zigzag * 2.5)  # type: ignore[union-attr]
        self.a_lora.bias.copy_(-0.19 + zigzag * 0.3 + linear * 0.4)  # type: ignore[union-attr]
        self.k_k.copy_(0.71 - linear * 0.1)
        self.k_a.fill_(1.02)
        self.r_k.fill_(-0.04)
        if self.norm is not None:
            self.norm.weight.fill_(((layer + 1) / n_layer) ** 0.7)

    def forward(
        self, x: Tensor, mask: Mask | None = None, return_weights: bool = False, cache: StateCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`mask`: packed documents or key padding (andrea.mixers.state_masks), as an attention block takes it."""
        where = call_mask(mask, x.shape[1], cache, self.name)
        mixed = self._mixed(x, cache, where)
        r, k, v, a, b, g, bonus = self._heads(mixed, where)
        o, state = dplr.run(self.form, r, k, v, a, b, g, 1.0, None if cache is None else cache.state, where.seg,
                            chunk=self.chunk)  # fmt: skip
        state = self.points["hook_state"](state)  # (B, H, K, V)
        if cache is not None:
            cache.state, cache.position, cache.document = state, cache.position + x.shape[1], where.last
        weights = None
        if (return_weights or self.points["hook_pattern"].fns) and cache is None:
            weights = self.points["hook_pattern"](dplr.weights(r, k, a, b, g, 1.0, where.seg).to(x.dtype))
        return self._output(o.to(x.dtype), bonus * v, mixed.get("g")), weights if return_weights else None

    def _mixed(self, x: Tensor, cache: StateCache | None, where: StateMask) -> dict[str, Tensor]:
        """Each stream's token-shifted input x + (x_{t-1} - x) ⊙ μ_s, (B, T, D); the last token kept for the next
        call."""
        previous, last = token_shift(x, None if cache is None else cache.conv.get("shift"), where.seg)
        if cache is not None:
            cache.conv["shift"] = last
        delta = previous - x
        return {s: torch.addcmul(x, delta, getattr(self, f"x_{s}")) for s in self.streams}

    def _heads(self, mixed: dict[str, Tensor], where: StateMask) -> tuple[Tensor, ...]:
        """r, k, v (B, H, T, K) as the recurrence reads them, its a = -κ̂ and b = κ̂ ⊙ a, the log decay g (B, H, T,
        K), and the bonus's r·(k ⊙ r_k) (B, H, T, 1): padding's keys, removals and decays zeroed in what the state
        reads (its bonus is its own token's)."""
        heads = self._to_heads
        r, k, v = heads(self.r_proj(mixed["r"])), heads(self.k_proj(mixed["k"])), heads(self.v_proj(mixed["v"]))
        g = self.points["hook_decay"](heads(-DECAY * torch.sigmoid(self.w_lora(mixed["w"]))))
        rate = heads(torch.sigmoid(self.a_lora(mixed["a"])))
        H, K = self.n_head, self.key_dim
        kappa = F.normalize(k * self.k_k.view(H, 1, K), dim=-1)
        k = k * (1 + (rate - 1) * self.k_a.view(H, 1, K))
        r, k, v = self.points["hook_q"].heads(r), self.points["hook_k"].heads(k), self.points["hook_v"].heads(v)
        bonus = (r * k * self.r_k.view(H, 1, K)).sum(-1, keepdim=True)
        k_read, g_read = where.keys(k, g)
        b_read, _ = where.keys(kappa * rate, None)
        assert g_read is not None  # a decay in, a decay out
        return r, k_read, v, -kappa, b_read, g_read, bonus

    def _to_heads(self, u: Tensor) -> Tensor:
        """(B, T, H·d) -> (B, H, T, d)."""
        return u.view(*u.shape[:2], self.n_head, -1).transpose(1, 2)

    def _output(self, o: Tensor, bonus: Tensor, x_g: Tensor | None) -> Tensor:
        """o (B, H, T, V) -> the per-head GroupNorm -> plus the bonus (B, H, T, V) -> times g -> hook_z -> W_O."""
        B, H, T, V = o.shape
        o = o.transpose(1, 2).reshape(B * T, H * V)
        o = (o if self.norm is None else self.norm(o)).view(B, T, H, V) + bonus.transpose(1, 2)
        if self.g_lora is not None and x_g is not None:
            o = o * self.points["hook_gate"](self.g_lora(x_g).view(B, T, H, V))
        return self.dropout(self.proj(self.points["hook_z"](o).reshape(B, T, H * V)))

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The layer as the paper writes it, one token at a time from a zero state, the transition a matrix (the
        conformance kit's reference, run in float64 there; never through `_mixed`, `_heads` or the forms):

            S_t = (diag(w_t) - (a_t ⊙ κ̂_t) κ̂_tᵀ) S_{t-1} + k_t v_tᵀ     (S_{t-1} and x_{t-1} dropped where a
            o_t = GroupNorm(S_tᵀ r_t) + (r_t · (k_t ⊙ r_k)) v_t          document starts)
            y_t = W_o (g_t ⊙ o_t)
        """
        B, D, H, K = x.shape[0], x.shape[2], self.n_head, self.key_dim
        S, before, out = x.new_zeros(B, H, K, K), x.new_zeros(B, D), []
        for token in tokens(x, mask, self.name):
            before = token.carried(before)
            mixed = {s: token.x + (before - token.x) * getattr(self, f"x_{s}") for s in self.streams}
            before = token.x
            r, k, v = (self.r_proj(mixed["r"]), self.k_proj(mixed["k"]), self.v_proj(mixed["v"]))
            r, k, v = r.view(B, H, K), k.view(B, H, K), v.view(B, H, K)
            w = torch.exp(-DECAY * torch.sigmoid(self.w_lora(mixed["w"]))).view(B, H, K)
            rate = torch.sigmoid(self.a_lora(mixed["a"])).view(B, H, K)
            kappa = k * self.k_k.view(H, K)
            kappa = kappa / kappa.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            k = k * (1 + (rate - 1) * self.k_a.view(H, K))
            transition = torch.diag_embed(w) - (rate * kappa).unsqueeze(-1) * kappa.unsqueeze(-2)  # (B, H, K, K)
            S = token.carried(S)
            S = token.kept(transition @ S + k.unsqueeze(-1) * v.unsqueeze(-2), S)
            o = torch.einsum("bhk,bhkv->bhv", r, S).flatten(1)
            o = (o if self.norm is None else self.norm(o)).view(B, H, K)
            o = o + (r * k * self.r_k.view(H, K)).sum(-1, keepdim=True) * v
            o = o if self.g_lora is None else o * self.g_lora(mixed["g"]).view(B, H, K)
            out.append(self.proj(o.flatten(1)))
        return torch.stack(out, dim=1)

    def new_cache(self) -> StateCache:
        return StateCache()

    def hook_points(self) -> dict[str, HookPoint]:
        return dict(self.points)

    def cache_size(self) -> CacheSize:
        """The state H·K·V, and the token shift's last input (D numbers, a convolution of kernel 2's)."""
        shift = self.n_head * self.key_dim
        return CacheSize(per_token=0, per_sequence=self.n_head * self.key_dim * self.value_dim + shift, conv=shift)

    def extra_repr(self) -> str:
        return f"rwkv7, n_head={self.n_head}, head_dim={self.key_dim}, form={self.form}"
