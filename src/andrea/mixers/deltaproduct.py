"""Gated DeltaProduct (Siems et al. 2025, "DeltaProduct: Improving State-Tracking in Linear RNNs via Householder
Products"): Gated DeltaNet with `n_householder` delta steps a token, each with its own key, value and β,

    S_{t,0} = α_t S_{t-1}, S_{t,j} = (I - β_{t,j} k_{t,j} k_{t,j}ᵀ) S_{t,j-1} + β_{t,j} k_{t,j} v_{t,j}ᵀ, S_t = S_{t,n}

so a token's transition is a product of n generalised Householder factors, which can express more of a
permutation group than one (n = 1 is Gated DeltaNet). The keys, values and β come from projections n times as
wide, laid out as fla's layer lays them, (n, heads, width) in each token's row; q, the decay, the short
convolutions, the output gate and norm are Gated DeltaNet's. With `allow_neg_eigval`, each β_{t,j} is in (0, 2)
(andrea.mixers.deltanet). Every form is the delta rule on T·n steps (andrea.ops.delta_rule.product).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.deltanet import GatedDeltaNet, unit
from andrea.mixers.linear_reference import token_heads, token_output
from andrea.mixers.short_conv import ShortConv
from andrea.ops import delta_rule
from andrea.ops.delta_rule import product
from andrea.ops.gated_linear import CHUNK


class GatedDeltaProduct(GatedDeltaNet):
    name = "gated_deltaproduct"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 2.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = True, gate: bool = True, norm: bool = True, norm_eps: float = 1e-5, l2_eps: float | None = None,
        allow_neg_eigval: bool = False, n_householder: int = 2,
    ) -> None:  # fmt: skip
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, expand_v=expand_v,
                         form=form, chunk=chunk, conv=conv, gate=gate, norm=norm, norm_eps=norm_eps,
                         l2_eps=l2_eps, allow_neg_eigval=allow_neg_eigval)  # fmt: skip
        n, H = n_householder, n_head
        self.n_householder = n
        self.k_proj = nn.Linear(d_model, n * H * self.key_dim, bias=bias)  # n keys a token
        self.v_proj = nn.Linear(d_model, n * H * self.value_dim, bias=bias)
        self.b_proj = nn.Linear(d_model, n * H, bias=bias)  # n β a token and head
        if self.convs is not None:
            self.convs["k"], self.convs["v"] = ShortConv(n * H * self.key_dim), ShortConv(n * H * self.value_dim)

    @property
    def steps_per_token(self) -> int:
        """The delta-rule steps a token takes (andrea.models.memory counts a chunk in steps)."""
        return self.n_householder

    def to_heads(self, stream: str, u: Tensor) -> Tensor:
        """q (B, H, T, K) as Gated DeltaNet's; k and v, n a token: (B, H, T·n, K|V), token t's j-th at t·n + j."""
        if stream == "q":
            return super().to_heads(stream, u)
        B, T, _ = u.shape
        return u.view(B, T, self.n_householder, self.n_head, -1).permute(0, 3, 1, 2, 4).flatten(2, 3)

    def beta(self, x: Tensor) -> Tensor:
        """β_{t,j} per head: (B, H, T·n), laid out as k."""
        B, T, _ = x.shape
        b = self.beta_max * torch.sigmoid(self.b_proj(x))
        return b.view(B, T, self.n_householder, self.n_head).permute(0, 3, 1, 2).flatten(2)

    def recur(
        self, x: Tensor, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, state: Tensor | None, seg: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        q_n, g_n, seg_n = product.steps(q, g, seg, self.n_householder)
        o, state = delta_rule.run(self.form, q_n, k, v, self.beta(x), g_n, self.scale, state, seg_n, self.chunk)
        return product.outputs(o, self.n_householder), state

    def implied(self, x: Tensor, q: Tensor, k: Tensor, g: Tensor | None, seg: Tensor | None) -> Tensor:
        return product.weights(q, k, self.beta(x), g, self.scale, seg, self.n_householder)

    @property
    def weights_meaning(self) -> str:
        return super().weights_meaning + f"; each a token's {self.n_householder} writes summed, their values apart"

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The paper's recurrence, one token at a time from a zero state, each transition a product of matrices:

        S_t = α_t S_{t-1}, then for j = 1..n:
            S_t = (I - β_{t,j} k_{t,j} k_{t,j}ᵀ) S_t + β_{t,j} k_{t,j} v_{t,j}ᵀ
        o_t = S_tᵀ q_t / sqrt(K)      q_t, k_{t,j} of unit length, β_{t,j} = sigmoid(W_β x_t)_j (x2 with
                                      allow_neg_eigval), α_t Gated DeltaNet's (S_{t-1} dropped where a
                                      document starts)
        """
        B, H, K, V, n = x.shape[0], self.n_head, self.key_dim, self.value_dim, self.n_householder
        eye, S, out = torch.eye(K, dtype=x.dtype, device=x.device), x.new_zeros(B, H, K, V), []
        for token, q_t, k_t, v_t in token_heads(self, x, mask):
            keys, values = k_t.reshape(B, n, H, K), v_t.reshape(B, n, H, V)  # the row's (n, heads, width) layout
            betas = self.beta_max * torch.sigmoid(self.b_proj(token.x)).view(B, n, H)
            S = token.carried(S)
            new = self._alpha(token.x) * S
            for j in range(n):
                k, v, beta = unit(keys[:, j], self.l2_eps), values[:, j], betas[:, j].view(B, H, 1, 1)
                new = (eye - beta * k.unsqueeze(-1) * k.unsqueeze(-2)) @ new + beta * k.unsqueeze(-1) * v.unsqueeze(-2)
            S = token.kept(new, S)
            q = unit(q_t, self.l2_eps)
            out.append(token_output(self, torch.einsum("bhk,bhkv->bhv", self.scale * q, S), token))
        return torch.stack(out, dim=1)
