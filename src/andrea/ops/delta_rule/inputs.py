"""What every form of the delta rule starts from (andrea.ops.delta_rule): its inputs in the working dtype, no
decay where none is given, and the state it starts from."""

from __future__ import annotations

from torch import Tensor

from andrea.ops.sequence import working_dtype


def prepared(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None) -> tuple[Tensor, ...]:
    """q, k, v, β and the log decay (zeros: DeltaNet) in the working dtype (float32 at least), the decay
    (B, H, T, K) (one a key channel: Kimi Delta Attention) or (B, H, T, 1) (one a head)."""
    dtype = working_dtype(q)
    g = q.new_zeros(q.shape[:3]) if g is None else g
    g = g if g.dim() == 4 else g.unsqueeze(-1)
    return tuple(x.to(dtype) for x in (q, k, v, beta, g))


def initial_state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    """The given state in q's dtype, or zeros: (B, H, K, V)."""
    B, H, _, K = q.shape
    return q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)
