"""What every form of gated linear attention starts from (andrea.ops.gated_linear): its inputs in the working
dtype, the log decay shaped to broadcast over the key channels, and the state it starts from."""

from __future__ import annotations

from torch import Tensor

from andrea.ops.sequence import working_dtype


def prepared(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """q, k, v and the log decay in the working dtype (float32 at least), the decay (B, H, T, K) or (B, H, T, 1)."""
    dtype = working_dtype(q)
    if g is None:
        g = q.new_zeros(q.shape[:3])
    g = g if g.dim() == 4 else g.unsqueeze(-1)
    return q.to(dtype), k.to(dtype), v.to(dtype), g.to(dtype)


def initial_state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    """The given state in q's dtype, or zeros: (B, H, K, V)."""
    B, H, _, K = q.shape
    return q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)
