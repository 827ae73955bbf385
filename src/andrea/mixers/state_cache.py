"""A recurrent mixer's cache for generation: a fixed-size state per sequence, whatever its length.

state     (B, H, K, V) the recurrence's S after the tokens seen (None before the first)
conv      (B, C, kernel - 1) the last inputs of the short causal convolution, where the mixer has one
position  the absolute position of the next token (what the network's position embedding reads)
document  (B,) the document id of the last token seen, under a packed-documents mask (andrea.mixers.state_masks)
"""

from __future__ import annotations

from torch import Tensor


class StateCache:
    def __init__(self) -> None:
        self.state: Tensor | None = None
        self.conv: dict[str, Tensor] = {}  # the convolution's last inputs, by the stream it convolves (q, k, v)
        self.position = 0
        self.document: Tensor | None = None

    @property
    def next_position(self) -> int:
        return self.position

    def __repr__(self) -> str:
        shape = None if self.state is None else tuple(self.state.shape)
        return f"StateCache(position={self.position}, state={shape})"
