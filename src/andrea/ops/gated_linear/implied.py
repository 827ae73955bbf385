"""The weights gated linear attention implies (andrea.ops.gated_linear), a (T, T) matrix per head like
attention's: what the parallel and chunked forms multiply V by, and what the maps draw."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.gated_linear.inputs import prepared


def weights(q: Tensor, k: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None) -> Tensor:
    """The implied weights (B, H, T, T): A_ij = scale · Σ_c q_ic k_jc exp(G_ic - G_jc) for j <= i in i's
    document, else 0."""
    q, k, _, g = prepared(q, k, q, g)
    return implied(q, k, g.cumsum(dim=2), scale, seg)


def implied(q: Tensor, k: Tensor, G: Tensor, scale: float, seg: Tensor | None) -> Tensor:
    """`weights` from the cumulative log decay G (B, H, T, K|1), inputs already in the working dtype."""
    T = q.shape[2]
    unseen = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # key after query
    if seg is not None:  # or in another document: (B, 1, T, T)
        unseen = unseen | (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1)
    gap = (G.unsqueeze(3) - G.unsqueeze(2)).masked_fill(unseen[..., None], float("-inf"))  # (B, H, T, T, K|1)
    if G.shape[-1] == 1:  # one decay per head: the scores times the decay, no (T, T, K) product
        return (q * scale) @ k.transpose(-2, -1) * gap.squeeze(-1).exp()
    return torch.einsum("bhik,bhjk,bhijk->bhij", q * scale, k, gap.exp())
