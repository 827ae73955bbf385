"""sink: softmax with a sink logit per head in the denominator (gpt-oss, 2025; with the logit fixed
at 0 it is Evan Miller's "Attention Is Off By One", 2023).

    A_ij = exp(s_ij) / (exp(sink_h) + sum_j' exp(s_ij'))        rows sum to less than 1
    out  = A V

The missing mass goes to no value at all: a head can attend to nothing instead of parking its
weight on the first token. `learned=True` (the default) makes sink_h a parameter per head,
initialised at 0; `learned=False` keeps it at 0, the off-by-one softmax.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.mechanisms.base import Mechanism, per_head, scores_of


class Sink(Mechanism):
    name = "sink"
    kernel = "sink"
    rows_sum_to_one = False
    weights_meaning = "softmax weights with a sink (each row sums to at most 1; the rest goes to no token)"

    sink: Tensor  # (H,) one logit per query head

    def __init__(self, *, learned: bool = True, **sizes: Any) -> None:
        super().__init__(**sizes)
        if not isinstance(learned, bool):
            raise ValueError(f"mechanism.learned={learned!r} must be true or false")
        self.learned = learned
        logits = torch.zeros(self.n_head)
        if learned:
            self.sink = nn.Parameter(logits)
        else:
            self.register_buffer("sink", logits, persistent=False)

    @property
    def label(self) -> str:
        return "sink" if self.learned else "sink_off_by_one"

    @classmethod
    def examples(cls, sizes: dict[str, Any]) -> list[Mechanism]:
        return [cls(**sizes), cls(**sizes, learned=False)]

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        sink = per_head(self.sink, head).to(scores.dtype)  # (1, H, 1, 1), or one head's scalar
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        top = torch.maximum(scores.amax(dim=-1, keepdim=True), sink)  # finite: the sink is always there
        e = torch.exp(scores - top)  # masked keys: exp(-inf) = 0
        return e / (e.sum(dim=-1, keepdim=True) + torch.exp(sink - top))

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        e = torch.exp(scores_of(q, k, scale, bias).masked_fill(~allowed, float("-inf")))  # exp(s_ij), seen keys
        sink = self.sink.to(q.dtype).view(1, -1, 1, 1)  # z_h
        return e / (torch.exp(sink) + e.sum(dim=-1, keepdim=True))

    def extra_repr(self) -> str:
        return "sink, learned" if self.learned else "sink, fixed at 0 (off by one)"
