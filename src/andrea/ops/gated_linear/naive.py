"""Gated linear attention token by token, as the recurrence is written (andrea.ops.gated_linear): the reference
its other forms are proven against, and the form generation runs one token at a time."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.gated_linear.inputs import initial_state, prepared
from andrea.ops.sequence import tokens


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The recurrence as written, token by token: (o (B, H, T, V), the final state (B, H, K, V))."""
    q, k, v, g = prepared(q, k, v, g)
    S, out = initial_state(q, v, state), []
    for t, (q_t, k_t, v_t, g_t) in enumerate(tokens(q, k, v, g)):
        decay = g_t.exp().unsqueeze(-1)  # (B, H, K|1, 1)
        if seg is not None:  # a new document: the state restarts
            decay = decay * (seg[:, t] == (seg[:, t - 1] if t else 0)).view(-1, 1, 1, 1)
        S = S * decay + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)  # (B, H, K, V)
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, dim=2), S
