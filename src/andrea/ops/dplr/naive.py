"""The diagonal-plus-low-rank recurrence token by token (andrea.ops.dplr): the reference its other forms are
proven against, and the form generation runs one token at a time."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.dplr.inputs import initial_state, prepared
from andrea.ops.sequence import tokens


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Token by token: (o (B, H, T, V), the final state (B, H, K, V))."""
    q, k, v, a, b, g = prepared(q, k, v, a, b, g)
    S, out = initial_state(q, v, state), []
    for t, (q_t, k_t, v_t, a_t, b_t, g_t) in enumerate(tokens(q, k, v, a, b, g)):
        if seg is not None:  # a new document: the state restarts
            S = S * (seg[:, t] == (seg[:, t - 1] if t else 0)).view(-1, 1, 1, 1)
        read = torch.einsum("bhk,bhkv->bhv", a_t, S)  # a_tᵀ S_{t-1}, before the decay
        S = g_t.exp().unsqueeze(-1) * S + b_t.unsqueeze(-1) * read.unsqueeze(-2) + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, dim=2), S
