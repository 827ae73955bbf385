"""Kimi Delta Attention (Kimi Team 2025, "Kimi Linear: An Expressive, Efficient Attention Architecture"): Gated
DeltaNet whose decay is one per key channel instead of one per head,

    S_t = (I - β_t k_t k_tᵀ) diag(α_t) S_{t-1} + β_t k_t v_tᵀ,      o_t = S_tᵀ q_t / sqrt(K)
    log α_t = -exp(A_log) · softplus(W_f↑ W_f↓ x_t + dt_bias)      (B, H, T, K): A_log per head, dt_bias per channel

with q, k and v through the short convolution and SiLU, q and k of unit length, β_t = sigmoid(W_β x_t) per head
(in (0, 2) with `allow_neg_eigval`), and the output a per-head RMSNorm times a sigmoid gate of a low-rank
projection, sigmoid(W_g↑ W_g↓ x_t) (the decay's low rank the key head's width, the gate's the value head's: one
width in the published layer and transformers' KimiLinearDeltaAttention, whose keys and values are as wide).
A_log ~ log U(1, 16) and softplus(dt_bias) ~ logU(1e-3, 1e-1), as fla initialises them. The recurrence is the
delta rule with a decay per channel (andrea.ops.delta_rule); its chunks' decayed products are andrea.ops.decayed's,
as GLA's are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.mixers.deltanet import DeltaNet
from andrea.mixers.mamba2 import dt_bias
from andrea.ops.gated_linear import CHUNK

A_MIN, A_MAX = 1.0, 16.0  # exp(A_log) ~ U(1, 16), as fla's KDA layer initialises it


class KDA(DeltaNet):
    name = "kda"
    gate_activation = staticmethod(torch.sigmoid)  # sigmoid(W_g↑ W_g↓ x), not swish

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 1.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = True, norm: bool = True, norm_eps: float = 1e-5, l2_eps: float | None = None,
        allow_neg_eigval: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, expand_v=expand_v,
                         form=form, chunk=chunk, conv=conv, gate=False, norm=norm, norm_eps=norm_eps,
                         l2_eps=l2_eps, allow_neg_eigval=allow_neg_eigval)  # fmt: skip
        H, K, V = n_head, self.key_dim, self.value_dim
        self.f_proj = nn.Sequential(nn.Linear(d_model, K, bias=False), nn.Linear(K, H * K, bias=False))  # W_f↓, W_f↑
        self.A_log = nn.Parameter(torch.empty(H).uniform_(A_MIN, A_MAX).log())
        self.dt_bias = dt_bias(H * K)  # one a key channel
        if gate:  # W_g↓, W_g↑: the sigmoid output gate's low-rank projection
            self.gate = nn.Sequential(nn.Linear(d_model, V, bias=False), nn.Linear(V, H * V, bias=bias))

    def log_decay(self, x: Tensor) -> Tensor:
        """log α_t = -exp(A_log) · softplus(W_f↑ W_f↓ x_t + dt_bias) <= 0: (B, H, T, K), one a key channel."""
        B, T, _ = x.shape
        step = F.softplus(self.f_proj(x) + self.dt_bias).view(B, T, self.n_head, self.key_dim)
        return (-self.A_log.exp().view(-1, 1) * step).transpose(1, 2)

    def _alpha(self, x_t: Tensor) -> Tensor:
        """One token's decay α_t = exp(-exp(A_log) · softplus(W_f↑ W_f↓ x_t + dt_bias)), (B, H, K, 1): the
        paper's, for `reference`."""
        B = x_t.shape[0]
        step = F.softplus(self.f_proj(x_t) + self.dt_bias).view(B, self.n_head, self.key_dim, 1)
        return torch.exp(-self.A_log.exp().view(-1, 1, 1) * step)
