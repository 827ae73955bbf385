"""Mamba-2's layer (Dao & Gu 2024, "Transformers are SSMs"): the state space duality (SSD) is gated linear
attention with one scalar decay per head and token, scale 1 (MIXERS.md):

    z, x, B, C, dt = in_proj(u)                       u (B, T, D); x (T, H, P) with H·P = expand·D; B, C (T, N)
    x, B, C = SiLU(conv4(x, B, C))                    a causal depthwise convolution of kernel 4, with a bias
    Δ = softplus(dt + dt_bias),  a_h = -exp(A_log_h)  the step and the decay rate, per head
    H_t = exp(Δ_t a_h) H_{t-1} + B_t (Δ_t x_t)ᵀ         the state (N, P) per head, every head reading one B and C
    y_t = H_tᵀ C_t + D_h x_t                          the D skip
    out = out_proj(RMSNorm(y ⊙ SiLU(z)))              the gated norm

The recurrence is andrea.ops.gated_linear's with q = C, k = B, v = Δ·x and g = Δ·a. Initialisation as
published: A ~ U(1, 16), Δ's bias such that softplus(dt_bias) ~ logU(1e-3, 1e-1), D = 1. The convolution, the z
gate and the norm are settings (mixer.conv, mixer.gate, mixer.norm), on as published.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.core.hook_points import HookPoint, Points
from andrea.mixers.base import CacheSize
from andrea.mixers.linear_layer import POINTS, check_form_and_heads
from andrea.mixers.short_conv import ShortConv
from andrea.mixers.state_cache import StateCache
from andrea.mixers.state_masks import StateMask, call_mask
from andrea.mixers.token_steps import ConvWindow, tokens
from andrea.ops import gated_linear
from andrea.utils.rules import Rule, one_of

DT_MIN, DT_MAX, A_MIN, A_MAX = 1e-3, 1e-1, 1.0, 16.0


def dt_bias(n_head: int) -> nn.Parameter:
    """The step's bias as published (Mamba-2, Gated DeltaNet): softplus(dt_bias) ~ logU(1e-3, 1e-1) per head."""
    dt = torch.exp(torch.empty(n_head).uniform_(math.log(DT_MIN), math.log(DT_MAX)))
    return nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)


class Mamba2(nn.Module):
    name = "mamba2"
    forms = gated_linear.FORMS  # mixer.form (the conformance kit runs each)
    setting_rules: ClassVar[dict[str, Rule]] = {"form": one_of(*gated_linear.FORMS)}  # andrea.mixers.settings
    signed = True  # C·B: SiLU's outputs can be negative

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand: int = 2, d_state: int = 16, form: str = "chunked",
        chunk: int = gated_linear.CHUNK, conv: bool = True, gate: bool = True, norm: bool = True,
    ) -> None:  # fmt: skip
        """conv, gate, norm: the convolution (with its SiLU), the z gate and the RMSNorm, each as published (on)."""
        super().__init__()
        inner = expand * d_model
        check_form_and_heads(form, n_head, inner, width=f"mixer.expand x d_model = {expand} x {d_model}")
        self.n_head, self.head_dim, self.d_state, self.inner = n_head, inner // n_head, d_state, inner
        self.form, self.chunk = form, chunk
        self.gated = gate
        self.in_proj = nn.Linear(d_model, (1 + gate) * inner + 2 * d_state + n_head, bias=bias)  # [z,] x, B, C, dt
        self.conv = ShortConv(inner + 2 * d_state, bias=True) if conv else None
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(A_MIN, A_MAX).log())
        self.dt_bias = dt_bias(n_head)
        self.D = nn.Parameter(torch.ones(n_head))
        self.norm = nn.RMSNorm(inner, eps=1e-5) if norm else None
        self.proj = nn.Linear(inner, d_model, bias=bias)  # out_proj: W_O
        self.dropout = nn.Dropout(dropout)
        self.points = Points(POINTS)

    def forward(
        self, u: Tensor, mask: Mask | None = None, return_weights: bool = False, cache: StateCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`mask`: packed documents or key padding (andrea.mixers.state_masks), as an attention block takes it."""
        where = call_mask(mask, u.shape[1], cache, self.name)
        z, x, q, k, v, g = self._inputs(u, cache, where)
        y, state = gated_linear.run(
            self.form, q, k, v, g, 1.0, None if cache is None else cache.state, where.seg, chunk=self.chunk
        )
        state = self.points["hook_state"](state)  # (B, H, N, P)
        if cache is not None:
            cache.state, cache.position, cache.document = state, cache.position + u.shape[1], where.last
        weights = None
        if (return_weights or self.points["hook_pattern"].fns) and cache is None:
            weights = self.points["hook_pattern"](gated_linear.weights(q, k, g, 1.0, where.seg).to(u.dtype))
        return self._output(y, x, z), weights if return_weights else None

    def reference(self, u: Tensor, mask: Mask | None = None) -> Tensor:
        """The layer as the paper writes it, one token at a time from a zero state and from its parameters, never
        through `_inputs`, `_output` or the forms (the conformance kit's reference, run in float64 there):

            H_t = exp(Δ_t a) H_{t-1} + B_t (Δ_t x_t)ᵀ    (H_{t-1} dropped where a document starts)
            y_t = H_tᵀ C_t + D x_t,    out_t = out_proj(RMSNorm(y_t ⊙ SiLU(z_t)))
        """
        Bsz, H, P, N = u.shape[0], self.n_head, self.head_dim, self.d_state
        a = -self.A_log.exp().view(1, H, 1, 1)  # the decay rate, per head
        conv = None if self.conv is None else ConvWindow(self.conv, Bsz)
        z_width = self.inner if self.gated else 0
        state, out = u.new_zeros(Bsz, H, N, P), []
        for token in tokens(u, mask, self.name):
            z, xbc, dt = self.in_proj(token.x).split([z_width, self.inner + 2 * N, H], dim=-1)
            x, B_t, C_t = (xbc if conv is None else conv(token, xbc)).split([self.inner, N, N], dim=-1)
            x, delta = x.view(Bsz, H, 1, P), F.softplus(dt + self.dt_bias).view(Bsz, H, 1, 1)
            state = token.carried(state)
            state = token.kept((delta * a).exp() * state + B_t.view(Bsz, 1, N, 1) * (delta * x), state)
            y = torch.einsum("bn,bhnp->bhp", C_t, state) + self.D.view(1, H, 1) * x.view(Bsz, H, P)
            out.append(self._token_output(y.flatten(1), z))
        return torch.stack(out, dim=1)

    def _token_output(self, y: Tensor, z: Tensor) -> Tensor:
        """One token's y (B, inner) -> [times SiLU(z_t)] -> [RMSNorm] -> out_proj, for `reference`."""
        y = y * F.silu(z) if self.gated else y
        return self.proj(y if self.norm is None else self.norm(y))

    def _inputs(self, u: Tensor, cache: StateCache | None, where: StateMask) -> tuple[Tensor, ...]:
        """z (B, T, inner), x (B, H, T, P), and the SSD's q = C, k = B (B, H, T, N), v = Δ·x and g = Δ·a
        (B, H, T), padding's keys zeroed."""
        Bsz, T, _ = u.shape
        H, P, N = self.n_head, self.head_dim, self.d_state
        z, xbc, dt = self.in_proj(u).split([self.inner if self.gated else 0, self.inner + 2 * N, H], dim=-1)
        if self.conv is not None:
            xbc, kept = self.conv(xbc, None if cache is None else cache.conv.get("xbc"), where.seg)
            if cache is not None:
                cache.conv["xbc"] = kept
        x, Bm, C = xbc.split([self.inner, N, N], dim=-1)
        delta = F.softplus(dt + self.dt_bias)  # (B, T, H)
        g = self.points["hook_decay"]((delta * -self.A_log.exp()).transpose(1, 2))  # (B, H, T): Δ·a <= 0
        x = x.view(Bsz, T, H, P).transpose(1, 2)  # (B, H, T, P)
        q = self.points["hook_q"].heads(C.unsqueeze(1).expand(Bsz, H, T, N))  # every head reads one C and B
        k = self.points["hook_k"].heads(Bm.unsqueeze(1).expand(Bsz, H, T, N))
        v = self.points["hook_v"].heads(x * delta.transpose(1, 2).unsqueeze(-1))
        k, kept_g = where.keys(k, g)
        assert kept_g is not None  # a decay in, a decay out
        return z, x, q, k, v, kept_g

    def _output(self, y: Tensor, x: Tensor, z: Tensor) -> Tensor:
        """The SSD's y (B, H, T, P) -> plus the D skip -> the gated RMSNorm -> hook_z -> out_proj."""
        Bsz, H, T, P = x.shape
        y = y.to(x.dtype) + self.D.view(1, H, 1, 1) * x  # the D skip
        y = y.transpose(1, 2).reshape(Bsz, T, self.inner)
        if self.gated:
            y = y * self.points["hook_gate"](F.silu(z).view(Bsz, T, H, P)).reshape(Bsz, T, self.inner)
        y = y if self.norm is None else self.norm(y)
        y = self.points["hook_z"](y.view(Bsz, T, H, P)).reshape(Bsz, T, self.inner)
        return self.dropout(self.proj(y))

    def new_cache(self) -> StateCache:
        return StateCache()

    def hook_points(self) -> dict[str, HookPoint]:
        return dict(self.points)

    def cache_size(self) -> CacheSize:
        """The state H·N·P, and the convolution's last 3 inputs of x, B and C."""
        conv = 0 if self.conv is None else (self.conv.kernel_size[0] - 1) * self.conv.in_channels
        return CacheSize(per_token=0, per_sequence=self.n_head * self.d_state * self.head_dim + conv, conv=conv)

    def extra_repr(self) -> str:
        return f"mamba2, n_head={self.n_head}, head_dim={self.head_dim}, d_state={self.d_state}, form={self.form}"
