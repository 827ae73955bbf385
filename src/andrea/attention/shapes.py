"""The shapes of the attention contract (andrea.attention.contract), as tensor helpers every backend may use:

check_shapes(q, k, v)      q (B, H, T, d), k and v (B, H_kv, S, d), H % H_kv == 0, T <= S, or one line why
expand_kv(x, n_head)       grouped heads' keys or values repeated for their query heads
weighted_values(w, v)      the weights (B, H, T, S) applied to v (B, H_kv, S, d), grouped heads sharing v
"""

from __future__ import annotations

from torch import Tensor


def weighted_values(weights: Tensor, v: Tensor) -> Tensor:
    """weights (B, H, T, S) @ v (B, H_kv, S, d) -> (B, H, T, d), grouped heads sharing v."""
    B, H, T, S = weights.shape
    H_kv = v.shape[1]
    out = weights.view(B, H_kv, H // H_kv, T, S) @ v.unsqueeze(2)  # (B, H_kv, group, T, d)
    return out.view(B, H, T, v.shape[-1])


def expand_kv(x: Tensor, n_head: int) -> Tensor:
    """(B, H_kv, S, d) -> (B, H, S, d): each kv head repeated for the query heads of its group."""
    return x.repeat_interleave(n_head // x.shape[1], dim=1)


def check_shapes(q: Tensor, k: Tensor, v: Tensor, distinct_value_dim: bool = False) -> None:
    """q (B, H, T, d), k (B, H_kv, S, d), v (B, H_kv, S, d), or (B, H_kv, S, d_v) for a backend that declares
    `distinct_value_dim` (latent attention's values)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"attention expects q (B, H, T, d) and k, v (B, H_kv, S, d); got dims {q.dim()}, {k.dim()}, {v.dim()}"
        )
    if k.shape[:-1] != v.shape[:-1] or (k.shape[-1] != v.shape[-1] and not distinct_value_dim):
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape")
    problem = _qk_problem(q, k)
    if problem:
        raise ValueError(problem)


def _qk_problem(q: Tensor, k: Tensor) -> str | None:
    if q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1]:
        return f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree on batch or head_dim"
    if q.shape[1] % k.shape[1] != 0:
        return f"q has {q.shape[1]} heads, not a multiple of k's {k.shape[1]} (n_head % n_kv_head != 0)"
    if q.shape[2] > k.shape[2]:
        return f"{q.shape[2]} queries over {k.shape[2]} keys: self-attention needs T <= S"
    return None
