"""stickbreaking: stick-breaking attention (Tan et al., ICLR 2025, "Scaling Stick-Breaking Attention"). Each
query breaks a stick from its nearest key back: key j takes a share β_ij = sigmoid(s_ij) of what the nearer keys
left,

    A_ij = β_ij Π_{j < l < i} (1 - β_il)        for keys j < i the mask allows (j <= i with attend_current),
                                                 the product over allowed keys only; 0 elsewhere

so a row sums to at most 1 (the leftover is dropped) and the first token's output is 0 (fla's convention,
`attend_current=false`). Order is the mechanism's own: no position encoding is needed, and keys after the query
are never read whatever the mask. In log space: log A_ij = logsigmoid(s_ij) + Σ_{l > j} logsigmoid(-s_il).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.attention.mechanisms.base import Mechanism, scores_of


def _before(T: int, S: int, attend_current: bool, device: torch.device) -> Tensor:
    """(T, S) True where key j comes before query i (at its own position too, with attend_current): the queries
    are the last T of S positions."""
    i = torch.arange(S - T, S, device=device).unsqueeze(-1)
    j = torch.arange(S, device=device)
    return j <= i if attend_current else j < i


class StickBreaking(Mechanism):
    name = "stickbreaking"
    kernel = "stickbreaking"
    rows_sum_to_one = False
    weights_meaning = "stick-breaking weights (the nearest key takes its share first; rows sum to at most 1)"

    def __init__(self, *, attend_current: bool = False, **sizes: Any) -> None:
        super().__init__(**sizes)
        if not isinstance(attend_current, bool):
            raise ValueError(f"mechanism.attend_current={attend_current!r} must be true or false")
        self.attend_current = attend_current

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        T, S = scores.shape[-2:]
        seen = _before(T, S, self.attend_current, scores.device)
        seen = seen if allowed is None else seen & allowed
        dtype, scores = scores.dtype, scores.to(torch.promote_types(scores.dtype, torch.float32))  # sums in fp32
        broken = F.logsigmoid(-scores).masked_fill(~seen, 0.0)  # log(1 - β) of the keys that break the stick
        after = broken.flip(-1).cumsum(-1).flip(-1) - broken  # Σ over allowed keys l > j
        return (F.logsigmoid(scores) + after).masked_fill(~seen, float("-inf")).exp().to(dtype)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        """The stick broken key by key, nearest first, as the paper tells it."""
        s = scores_of(q, k, scale, bias)
        T, S = s.shape[-2:]
        seen = allowed & _before(T, S, self.attend_current, s.device)
        beta, weights = torch.sigmoid(s), torch.zeros_like(s)
        left = torch.ones_like(s[..., 0])  # (B, H, T): the stick each query still holds
        for j in reversed(range(S)):
            share = torch.where(seen[..., j], beta[..., j] * left, 0.0)
            weights[..., j] = share
            left = left - share
        return weights

    @classmethod
    def examples(cls, sizes: dict[str, Any]) -> list[Mechanism]:
        return [cls(**sizes), cls(attend_current=True, **sizes)]

    @property
    def label(self) -> str:
        return "stickbreaking_current" if self.attend_current else "stickbreaking"

    def extra_repr(self) -> str:
        return f"stickbreaking, attend_current={self.attend_current}"
