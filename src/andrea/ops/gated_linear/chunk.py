"""Gated linear attention in chunks (andrea.ops.gated_linear): inside a chunk of C tokens the implied weights,
across chunks the state, O(T·C·K + T·K·V), linear in T; and the parallel form, the whole sequence as one chunk."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.ops.gated_linear.implied import implied
from andrea.ops.gated_linear.inputs import initial_state, prepared
from andrea.ops.sequence import CHUNK, chunk_padding, chunks


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
    S, out = initial_state(q, v, state), []
    for here, (q_c, k_c, v_c, g_c) in chunks(T + pad, chunk, seg, q, k, v, g):
        o, S = one_chunk(q_c, k_c, v_c, g_c, scale, S, here)
        out.append(o)
    return torch.cat(out, dim=2)[:, :, :T], S


def one_chunk(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One chunk from the state before it: the weights inside it times V, plus the decayed state read by the
    queries; and the state after it. G, the cumulative log decay from the chunk's start, is <= 0. With `seg`,
    only the queries of document 0 read the state, and only the last document's keys are carried."""
    G = g.cumsum(dim=2)  # (B, H, C, K|1)
    inside = implied(q, k, G, scale, seg) @ v  # (B, H, C, V)
    read, last = q * scale * G.exp(), G[:, :, -1:]  # the state decayed to each query; the whole chunk's decay
    kept = k * (last - G).exp()  # k_j exp(G_last - G_j)
    carry = last.transpose(-2, -1).exp()  # (B, H, K|1, 1)
    if seg is not None:
        read = read * (seg == 0)[:, None, :, None]
        kept = kept * (seg == seg[:, -1:])[:, None, :, None]
        carry = carry * (seg[:, -1] == 0).view(-1, 1, 1, 1)
    return inside + read @ S, S * carry + kept.transpose(-2, -1) @ v


def parallel(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The implied weights times V, plus what a given state adds, with the final state."""
    q, k, v, g = prepared(q, k, v, g)
    return one_chunk(q, k, v, g, scale, initial_state(q, v, state), seg)
