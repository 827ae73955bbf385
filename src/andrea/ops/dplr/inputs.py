"""What every form of the diagonal-plus-low-rank recurrence starts from (andrea.ops.dplr): its inputs in the working
dtype and the state it starts from."""

from __future__ import annotations

from torch import Tensor

from andrea.ops.sequence import working_dtype


def prepared(q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor) -> tuple[Tensor, ...]:
    """q, k, v, a, b and the log decay (B, H, T, K) in the working dtype (float32 at least)."""
    dtype = working_dtype(q)
    return tuple(x.to(dtype) for x in (q, k, v, a, b, g))


def initial_state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    """The given state in q's dtype, or zeros: (B, H, K, V)."""
    B, H, _, K = q.shape
    return q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)
