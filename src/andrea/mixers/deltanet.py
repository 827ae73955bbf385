"""DeltaNet (Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length") and
Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks"): linear attention whose state is corrected toward each
new value (andrea.mixers.delta_rule),

    S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,     o_t = S_tᵀ q_t / sqrt(K)

with q and k L2-normalised per head after the short convolution (kernel 4, SiLU; on by default), β_t =
sigmoid(W_β x_t) per head, and a per-head RMSNorm on the output. DeltaNet has no decay (α = 1); Gated DeltaNet's is
one per head and token, log α_t = -exp(A_log) · softplus(W_α x_t + dt_bias) (A ~ U(0, 16), softplus(dt_bias) ~
logU(1e-3, 1e-1), as Mamba-2's), with values twice the keys' width and a swish output gate (MIXERS.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers import delta_rule
from andrea.mixers.gated_linear import CHUNK
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.mamba2 import dt_bias
from andrea.mixers.state_masks import state_mask

A_MAX = 16.0


class DeltaNet(LinearMixer):
    name = "deltanet"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 1.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = False, norm: bool = True,
    ) -> None:  # fmt: skip
        head = d_model // n_head
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head,
                         value_dim=max(1, int(head * expand_v)), form=form, chunk=chunk, conv=conv, gate=gate,
                         norm=norm)  # fmt: skip
        self.b_proj = nn.Linear(d_model, n_head, bias=bias)  # β = sigmoid(W_β x), per head

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        return F.normalize(q, dim=-1), F.normalize(k, dim=-1)

    def beta(self, x: Tensor) -> Tensor:
        """β_t in (0, 1) per head and token: (B, H, T)."""
        return torch.sigmoid(self.b_proj(x)).transpose(1, 2)

    def recur(
        self, x: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, state: Tensor | None, seg: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return delta_rule.run(self.form, q, k, v, self.beta(x), g, self.scale, state, seg, chunk=self.chunk)

    def implied(self, x: Tensor, q: Tensor, k: Tensor, g: Tensor | None, seg: Tensor | None) -> Tensor:
        return delta_rule.weights(q, k, self.beta(x), g, self.scale, seg)

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The layer with the delta rule as the papers write it, one token at a time from a zero state, the
        transition a matrix (the conformance kit's reference, run in float64 there):

            S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ     (S_{t-1} dropped where a new document starts)
            o_t = S_tᵀ (scale · q_t)
        """
        where = state_mask(mask, 0, x.shape[1], mixer=self.name)
        q, k, v, g = self._inputs(x, None, where)
        beta = self.beta(x)
        B, H, T, K = q.shape
        eye, S, out = torch.eye(K, dtype=q.dtype), q.new_zeros(B, H, K, v.shape[-1]), []
        for t in range(T):
            alpha = q.new_ones(B, H) if g is None else g[:, :, t].exp()
            if where.seg is not None and t > 0:
                alpha = alpha * (where.seg[:, t] == where.seg[:, t - 1]).view(B, 1)
            kt, bt = k[:, :, t], beta[:, :, t, None, None]
            transition = alpha[..., None, None] * (eye - bt * kt.unsqueeze(-1) * kt.unsqueeze(-2))  # (B, H, K, K)
            S = transition @ S + bt * kt.unsqueeze(-1) * v[:, :, t].unsqueeze(-2)
            out.append(torch.einsum("bhk,bhkv->bhv", self.scale * q[:, :, t], S))
        return self._output(torch.stack(out, dim=2), x)


class GatedDeltaNet(DeltaNet):
    name = "gated_deltanet"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 2.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = True, norm: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, expand_v=expand_v,
                         form=form, chunk=chunk, conv=conv, gate=gate, norm=norm)  # fmt: skip
        self.a_proj = nn.Linear(d_model, n_head, bias=False)  # W_α
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(0, A_MAX).clamp_min(1e-4).log())
        self.dt_bias = dt_bias(n_head)  # as Mamba-2's

    def log_decay(self, x: Tensor) -> Tensor:
        """log α_t = -exp(A_log) · softplus(W_α x_t + dt_bias) <= 0: (B, H, T), one decay per head."""
        return (-self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)).transpose(1, 2)
