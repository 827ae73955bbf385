"""The delta rule token by token, as the recurrence is written (andrea.ops.delta_rule): the reference its other
forms are proven against, and the form generation runs one token at a time."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.delta_rule.inputs import initial_state, prepared
from andrea.ops.sequence import tokens


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Token by token: (o (B, H, T, V), the final state (B, H, K, V))."""
    q, k, v, beta, g = prepared(q, k, v, beta, g)
    S, out = initial_state(q, v, state), []
    for t, (q_t, k_t, v_t, beta_t, g_t) in enumerate(tokens(q, k, v, beta, g)):
        decay = g_t.exp().unsqueeze(-1)  # (B, H, K|1, 1)
        if seg is not None:  # a new document: the state restarts
            decay = decay * (seg[:, t] == (seg[:, t - 1] if t else 0)).view(-1, 1, 1, 1)
        S = decay * S
        u = beta_t.unsqueeze(-1) * (v_t - torch.einsum("bhkv,bhk->bhv", S, k_t))
        S = S + k_t.unsqueeze(-1) * u.unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, dim=2), S
