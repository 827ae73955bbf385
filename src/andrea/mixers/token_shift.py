"""RWKV's token shift: each token's input beside the one before it, x_{t-1}, so that a layer's projections can
read a mix of the two (x_t + (x_{t-1} - x_t) ⊙ μ, one learned μ a stream): a convolution of kernel 2 before
the state. The token before a packed document's first token is zeros (its document has none), as is the one
before a sequence's first; generation keeps the last token's input for the next call.
"""

from __future__ import annotations

import torch
from torch import Tensor


def token_shift(x: Tensor, before: Tensor | None = None, seg: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """x (B, T, D) and the input before it (B, D) (None: a sequence's start) -> x_{t-1} (B, T, D) and x's last
    token (B, D), what the next call reads. `seg` (B, T): each token's document from 0, the one `before` is in
    (andrea.mixers.state_masks); where it changes, the token before is zeros."""
    first = x.new_zeros(x.shape[0], 1, x.shape[2]) if before is None else before.unsqueeze(1).to(x.dtype)
    previous = torch.cat((first, x[:, :-1]), dim=1)
    if seg is not None:
        starts = seg != torch.cat((seg.new_zeros(seg.shape[0], 1), seg[:, :-1]), dim=1)
        previous = previous * ~starts.unsqueeze(-1)
    return previous, x[:, -1]
