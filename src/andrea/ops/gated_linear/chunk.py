"""Gated linear attention in chunks (andrea.ops.gated_linear): inside a chunk of C tokens the implied weights,
across chunks the state, O(T·C·K + T·K·V), linear in T; and the parallel form, the whole sequence as one chunk.

Every chunk's own part is computed at once, the chunks side by side: its weights times V, the write it leaves in
the state, its decay. Only the state is carried from one chunk to the next, an elementwise step a chunk."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.ops.decayed import across
from andrea.ops.gated_linear.implied import implied
from andrea.ops.gated_linear.inputs import initial_state, prepared
from andrea.ops.sequence import CHUNK, chunk_padding, side_by_side


def chunked(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside to a multiple), each the parallel form from the state the chunks
    before it left: (o (B, H, T, V), the final state)."""
    q, k, v, g = prepared(q, k, v, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)  # padded tokens: k = v = 0 and no decay leave the state as it was
    q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
    docs, (q_n, k_n, v_n, g_n) = side_by_side(T + pad, chunk, seg, q, k, v, g)
    o, S = across_chunks(q_n, k_n, v_n, g_n, scale, initial_state(q, v, state), docs)
    return o.flatten(2, 3)[:, :, :T], S


def across_chunks(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Chunks side by side, q, k (B, H, n, C, K), v (B, H, n, C, V), g (B, H, n, C, K|1), from the state before
    the first: each chunk's weights times V, plus the decayed state before it read by its queries; and the state
    after the last. G, the cumulative log decay from a chunk's start, is <= 0. With `seg` (B, n, C), each chunk's
    documents from 0 (the one the state before it belongs to): only document 0's queries read that state, and
    only the last document's keys are carried."""
    G = g.cumsum(dim=3)
    inside = implied(q, k, G, scale, seg) @ v  # (B, H, n, C, V)
    first, kept, carry = across(G, seg)
    read = q * scale * first  # the state decayed to each query
    writes = (k * kept).transpose(-2, -1) @ v  # (B, H, n, K, V): what each chunk adds to the state
    before = []
    for carry_c, write_c in zip(carry.unbind(2), writes.unbind(2), strict=True):
        before.append(S)
        S = S * carry_c + write_c
    return inside + read @ torch.stack(before, dim=2), S


def parallel(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The implied weights times V, plus what a given state adds, with the final state: one chunk of T."""
    q, k, v, g = prepared(q, k, v, g)
    q_1, k_1, v_1, g_1 = (x.unsqueeze(2) for x in (q, k, v, g))
    docs = None if seg is None else seg.unsqueeze(1)
    o, S = across_chunks(q_1, k_1, v_1, g_1, scale, initial_state(q, v, state), docs)
    return o.squeeze(2), S
