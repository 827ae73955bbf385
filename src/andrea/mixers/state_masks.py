"""What a recurrent mixer does with a per-batch mask, the `mask=` an attention block takes too (ANDed with the
causal order every recurrent mixer has by construction):

    packed documents (Document: document_ids)   the state restarts where a row's id changes, so a document
                                                reads only its own tokens; an id that comes back after another
                                                starts a new document (attention's mask joins equal ids
                                                wherever they are; packed rows never repeat one)
    key padding (KeyPadding: lengths)           a padding token's key is zero and its decay none: the state
                                                after a sequence's last real token stays as it was
    a window, a prefix, a band, a `|`           refused: a state cannot drop a window's far end or look ahead

With a cache, `before` is the document id of the last token the state has seen, and `start` the position of
x's first token among the mask's (B, S) ids and lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from andrea.attention.masks import Mask


@dataclass(frozen=True)
class StateMask:
    seg: Tensor | None = None  # (B, T) each token's document, numbered from 0: the document the state is in
    keep: Tensor | None = None  # (B, T) True at a real token, False at padding
    last: Tensor | None = None  # (B,) the id of x's last token (a cache keeps it for the next call)

    def keys(self, k: Tensor, g: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """k (B, H, T, K) and the log decay g (B, H, T[, K]) with the padding's keys and decays zeroed; k may
        hold n keys a token, (B, H, T·n, K) (andrea.ops.delta_rule.product)."""
        if self.keep is None:
            return k, g
        keep = self.keep[:, None, :]  # (B, 1, T)
        g = None if g is None else g * (keep if g.dim() == 3 else keep[..., None])
        return k * keep.repeat_interleave(k.shape[2] // keep.shape[2], dim=2)[..., None], g


def call_mask(mask: Mask | None, T: int, cache: Any, mixer: str) -> StateMask:
    """`state_mask` for a call of T tokens from a StateCache (its position and last document id), or None."""
    start, before = (0, None) if cache is None else (cache.position, cache.document)
    return state_mask(mask, start, T, before, mixer)


def state_mask(mask: Mask | None, start: int, T: int, before: Tensor | None = None, mixer: str = "") -> StateMask:
    """The mask's documents and padding at positions start .. start + T - 1; a mask a state cannot follow is
    refused in one line naming `mixer`."""
    if mask is None:
        return StateMask()
    params = mask.params()
    if params is None or params.window is not None or params.prefix or params.band:
        raise ValueError(
            f"mixer {mixer}: mask {mask.name} is not one a recurrent state can follow; it takes packed documents "
            f"(document) and key padding (padding), ANDed with its causal order"
        )
    seg = last = keep = None
    if params.document_ids is not None:
        ids = params.document_ids[:, start : start + T]
        first = ids[:, :1] if before is None else before.view(-1, 1).to(ids.device)
        seg = (ids != torch.cat((first, ids[:, :-1]), dim=1)).cumsum(dim=1)
        last = ids[:, -1]
    if params.lengths is not None:
        keep = torch.arange(start, start + T, device=params.lengths.device) < params.lengths.view(-1, 1)
    return StateMask(seg, keep, last)
