"""DeltaNet (Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length") and
Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks"): linear attention whose state is corrected toward each
new value (andrea.ops.delta_rule),

    S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,     o_t = S_tᵀ q_t / sqrt(K)

with q and k L2-normalised per head after the short convolution (kernel 4, SiLU; on by default; `l2_eps`: divided
by sqrt(|u|² + eps) as flash-linear-attention's l2norm and Qwen3-Next do, instead of by |u|), β_t =
sigmoid(W_β x_t) per head, and a per-head RMSNorm on the output. With `allow_neg_eigval`, β_t = 2 sigmoid(W_β x_t)
in (0, 2), so the transition's eigenvalue along k_t, 1 - β_t, reaches toward -1 (Grazzi et al., ICLR 2025: with
eigenvalues in [0, 1] a linear RNN cannot learn parity; fla's `allow_neg_eigval`). DeltaNet has no decay
(α = 1); Gated DeltaNet's is one per head and token, log α_t = -exp(A_log) · softplus(W_α x_t + dt_bias)
(A ~ U(0, 16), softplus(dt_bias) ~ logU(1e-3, 1e-1), as Mamba-2's), with values twice the keys' width and a swish
output gate (MIXERS.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import token_heads, token_output
from andrea.mixers.mamba2 import dt_bias
from andrea.ops import delta_rule
from andrea.ops.gated_linear import CHUNK
from andrea.ops.sequence import working_dtype

A_MAX = 16.0


class DeltaNet(LinearMixer):
    name = "deltanet"
    # rows of the conformance kit besides the defaults: the transition's eigenvalue reaching -1 (here and in every
    # mixer built on this one)
    kit_settings: ClassVar[tuple[dict[str, Any], ...]] = ({"allow_neg_eigval": True},)

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 1.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = False, norm: bool = True, norm_eps: float = 1e-5, l2_eps: float | None = None,
        allow_neg_eigval: bool = False,
    ) -> None:  # fmt: skip
        head = d_model // n_head
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head,
                         value_dim=max(1, int(head * expand_v)), form=form, chunk=chunk, conv=conv, gate=gate,
                         norm=norm, norm_eps=norm_eps)  # fmt: skip
        self.b_proj = nn.Linear(d_model, n_head, bias=bias)  # β = sigmoid(W_β x), per head
        self.l2_eps = l2_eps
        self.allow_neg_eigval = allow_neg_eigval

    @property
    def beta_max(self) -> float:
        """β_t = beta_max · sigmoid(W_β x_t): 1, or 2 with `allow_neg_eigval`."""
        return 2.0 if self.allow_neg_eigval else 1.0

    @property
    def weights_meaning(self) -> str:
        """The delta rule's implied weights, scale D(Q, K)(I + L)⁻¹ diag(β) (andrea.ops.delta_rule): not q·k alone,
        since each write takes back what the earlier keys stored along its key; D the decayed scores (DeltaNet has
        no decay, Gated DeltaNet one a head, KDA one a key channel)."""
        return (
            f"implied weights of the delta rule: {self.scores_meaning}, each write β-scaled and less what earlier "
            "keys stored there; each earlier token's share of the output (rows need not sum to 1)"
        )

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """q and k of unit length, in float32 at least (as fla's kernels normalise them): in bfloat16 a key's
        |k|² is 1 only to 2⁻⁸, and with β near 2 (allow_neg_eigval) the transition's eigenvalue 1 - β|k|² along
        it then passes -1, so rounding grows instead of fading."""
        q, k = q.to(working_dtype(q)), k.to(working_dtype(k))
        if self.l2_eps is None:
            return F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        return _l2(q, self.l2_eps), _l2(k, self.l2_eps)

    def beta(self, x: Tensor) -> Tensor:
        """β_t in (0, 1) per head and token, (0, 2) with `allow_neg_eigval`: (B, H, T)."""
        return (self.beta_max * torch.sigmoid(self.b_proj(x))).transpose(1, 2)

    def recur(
        self, x: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, state: Tensor | None, seg: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return delta_rule.run(self.form, q, k, v, self.beta(x), g, self.scale, state, seg, chunk=self.chunk)

    def implied(self, x: Tensor, q: Tensor, k: Tensor, g: Tensor | None, seg: Tensor | None) -> Tensor:
        return delta_rule.weights(q, k, self.beta(x), g, self.scale, seg)

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The delta rule as the papers write it, one token at a time from a zero state, the transition a matrix
        (andrea.mixers.linear_reference for the layer around it):

            S_t = (I - β_t k_t k_tᵀ) diag(α_t) S_{t-1} + β_t k_t v_tᵀ   (S_{t-1} dropped where a document starts)
            o_t = S_tᵀ q_t / sqrt(K),   q_t, k_t of unit length, β_t = sigmoid(W_β x_t)   (DeltaNet: α_t = 1)
            (with allow_neg_eigval: β_t = 2 sigmoid(W_β x_t))
        """
        B, H, K = x.shape[0], self.n_head, self.key_dim
        eye, S, out = torch.eye(K, dtype=x.dtype, device=x.device), x.new_zeros(B, H, K, self.value_dim), []
        for token, q_t, k_t, v in token_heads(self, x, mask):
            q, k = unit(q_t, self.l2_eps), unit(k_t, self.l2_eps)
            beta = self.beta_max * torch.sigmoid(self.b_proj(token.x)).view(B, H, 1, 1)
            # (I - β k kᵀ) diag(α): each column scaled by its channel's decay (or the head's), (B, H, K, K)
            transition = (eye - beta * k.unsqueeze(-1) * k.unsqueeze(-2)) * self._alpha(token.x).transpose(-2, -1)
            S = token.carried(S)
            S = token.kept(transition @ S + beta * k.unsqueeze(-1) * v.unsqueeze(-2), S)
            out.append(token_output(self, torch.einsum("bhk,bhkv->bhv", self.scale * q, S), token))
        return torch.stack(out, dim=1)

    def _alpha(self, x_t: Tensor) -> Tensor:
        """One token's decay α_t as diag(α_t) S multiplies it: (B, H, 1, 1), one a head, or (B, H, K, 1), one a key
        channel. DeltaNet has none."""
        return x_t.new_ones(x_t.shape[0], self.n_head, 1, 1)


def unit(u: Tensor, eps: float | None) -> Tensor:
    """One token's q or k (B, H, K) divided by its length (at least 1e-12, as F.normalize floors it), or by
    sqrt(|u|² + eps)."""
    if eps is None:
        return u / u.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return u / (u.norm(dim=-1, keepdim=True) ** 2 + eps).sqrt()


def _l2(u: Tensor, eps: float) -> Tensor:
    """u (.., K) times rsqrt(|u|² + eps): flash-linear-attention's l2norm."""
    return u * torch.rsqrt((u * u).sum(dim=-1, keepdim=True) + eps)


class GatedDeltaNet(DeltaNet):
    name = "gated_deltanet"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 2.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = True, norm: bool = True, norm_eps: float = 1e-5, l2_eps: float | None = None,
        allow_neg_eigval: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, expand_v=expand_v,
                         form=form, chunk=chunk, conv=conv, gate=gate, norm=norm, norm_eps=norm_eps,
                         l2_eps=l2_eps, allow_neg_eigval=allow_neg_eigval)  # fmt: skip
        self.a_proj = nn.Linear(d_model, n_head, bias=False)  # W_α
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(0, A_MAX).clamp_min(1e-4).log())
        self.dt_bias = dt_bias(n_head)  # as Mamba-2's

    def log_decay(self, x: Tensor) -> Tensor:
        """log α_t = -exp(A_log) · softplus(W_α x_t + dt_bias) <= 0: (B, H, T), one decay per head."""
        return (-self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)).transpose(1, 2)

    def _alpha(self, x_t: Tensor) -> Tensor:
        """One token's decay α_t = exp(-exp(A_log) · softplus(W_α x_t + dt_bias)), (B, H, 1, 1): the paper's, for
        `reference`."""
        rate, step = self.A_log.exp(), F.softplus(self.a_proj(x_t) + self.dt_bias)  # (H,), (B, H)
        return torch.exp(-rate * step).view(*step.shape, 1, 1)
