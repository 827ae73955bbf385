"""A layer's input one token at a time, as a mixer's recurrence reads it: `reference(x, mask)`, the layer written
the way its paper writes it, which the conformance kit proves every form against (andrea.testing.mixer_checks).

A recurrence is written apart from the forms it proves, so that a mistake in what the forms share (a decay that
reads a later token, a feature map applied to the wrong positions) shows as a difference instead of being
repeated on both sides. What it reads here is therefore only ever one token: each step hands it the token's
input x_t and what the mask says of that token, never the sequence, and the short convolution keeps its own
window of past inputs instead of running `ShortConv` over the sequence.

    Token.carried(state)     the state as token t reads it: zero where t starts a packed document
    Token.kept(new, old)     the state after t: `new`, or `old` unchanged where t is padding (it writes nothing)
    ConvWindow(conv, batch)  a short causal convolution on one token at a time, its window reset at a document's
                             start
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.state_masks import state_mask


@dataclass(frozen=True)
class Token:
    t: int  # the token's position, from 0
    x: Tensor  # (B, D) the layer's input at t
    starts: Tensor  # (B,) True where a packed document starts at t (t = 0 included): nothing before t is read
    real: Tensor  # (B,) False at a padding token

    def carried(self, state: Tensor) -> Tensor:
        """A state (B, ...) as this token reads it: zero where the token starts a document."""
        return state * ~self.starts.view(-1, *[1] * (state.dim() - 1))

    def kept(self, new: Tensor, old: Tensor) -> Tensor:
        """The state after this token: `new`, or `old` where the token is padding (a padding token's key is no key:
        the state after a sequence's last real token stays as it was)."""
        return torch.where(self.real.view(-1, *[1] * (new.dim() - 1)), new, old)


def tokens(x: Tensor, mask: Mask | None, mixer: str) -> Iterator[Token]:
    """x (B, T, D) one token at a time, with what the mask says of each. The mask is read as andrea.mixers.state_masks
    reads it for the forms (its documents and padding; a mask a state cannot follow refused in one line naming
    `mixer`): how a mask is read is not a form's arithmetic, and has tests of its own."""
    B, T, _ = x.shape
    where = state_mask(mask, 0, T, mixer=mixer)
    starts = torch.zeros(B, T, dtype=torch.bool, device=x.device)
    starts[:, 0] = True
    if where.seg is not None:
        starts[:, 1:] = where.seg[:, 1:] != where.seg[:, :-1]
    real = torch.ones(B, T, dtype=torch.bool, device=x.device) if where.keep is None else where.keep
    for t, x_t in enumerate(x.unbind(1)):
        yield Token(t, x_t, starts[:, t], real[:, t])


class ConvWindow:
    """A short causal depthwise convolution (andrea.mixers.short_conv's parameters) one token at a time, as the papers
    write it: the last `kernel` inputs of the token's own document (zeros before its start), each channel's
    y_t = SiLU(b + Σ_i w_i u_{t-kernel+1+i})."""

    def __init__(self, conv: nn.Conv1d, batch: int) -> None:
        self.weight, self.bias = conv.weight[:, 0], conv.bias  # (C, kernel): the last tap reads the newest input
        self.inputs = self.weight.new_zeros(batch, *self.weight.shape)  # (B, C, kernel), the oldest first

    def __call__(self, token: Token, u: Tensor) -> Tensor:
        """u (B, C), the token's input -> (B, C)."""
        self.inputs = torch.cat((token.carried(self.inputs)[..., 1:], u.unsqueeze(-1)), dim=-1)
        y = (self.inputs * self.weight).sum(-1)
        return F.silu(y if self.bias is None else y + self.bias)
