"""What every form of the diagonal-plus-low-rank recurrence starts from (andrea.ops.dplr): its inputs in the working
dtype and the state it starts from."""

from __future__ import annotations

from torch import Tensor

from andrea.ops.sequence import working_dtype


def prepared(q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor) -> tuple[Tensor, ...]:
    """q, k, v, a, b and the log decay (B, H, T, K) in the working dtype (float32 at least)."""
    dtype = working_dtype(q)
    return tuple(x.to(dtype) for x in (q, k, v, a, b, g))


MIN_LOG_DECAY = 20.0  # the most log decay a token the chunked and parallel forms take (a' = a exp(-g) <= e^20 |a|)


def checked_decay(g: Tensor) -> Tensor:
    """g itself, or ValueError where a token's log decay is below -MIN_LOG_DECAY: the chunked and parallel forms
    scale a by exp(-g) (andrea.ops.dplr's docstring), which would overflow float32 past e^88."""
    lowest = float(g.detach().min()) if g.numel() else 0.0
    if lowest < -MIN_LOG_DECAY:
        raise ValueError(
            f"andrea.ops.dplr: a log decay of {lowest:.3g} a token is below -{MIN_LOG_DECAY:g}, which the "
            "chunked and parallel forms do not take; use form=recurrent, or bound the decay (RWKV-7's is >= -0.61)"
        )
    return g


def initial_state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    """The given state in q's dtype, or zeros: (B, H, K, V)."""
    B, H, _, K = q.shape
    return q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)
