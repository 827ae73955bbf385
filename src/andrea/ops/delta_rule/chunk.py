"""The delta rule in chunks, the WY/UT form (andrea.ops.delta_rule's docstring has the equations): inside a
chunk a triangular solve, across chunks the state, linear in T; and the parallel form, the whole sequence as one
chunk."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.ops.decayed import decayed
from andrea.ops.delta_rule.implied import unit_lower
from andrea.ops.delta_rule.inputs import initial_state, prepared
from andrea.ops.sequence import CHUNK, chunk_padding, chunks


def chunked(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside: k = 0 and no decay leave the state as it was)."""
    q, k, v, beta, g = prepared(q, k, v, beta, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, 0, 0, pad))
    S, out = initial_state(q, v, state), []
    for here, (q_c, k_c, v_c, beta_c, g_c) in chunks(T + pad, chunk, seg, q, k, v, beta, g):
        o, S = one_chunk(q_c, k_c, v_c, beta_c, g_c, scale, S, here)
        out.append(o)
    return torch.cat(out, dim=2)[:, :, :T], S


def one_chunk(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One chunk from the state before it (andrea.ops.delta_rule's docstring); with `seg`, only document 0 reads
    S_0 and only the last document's keys are carried."""
    G = g.cumsum(dim=2)  # (B, H, C, K|1)
    first = G.exp()  # how much of S_0 reaches each token, per key channel or for the whole head
    if seg is not None:
        first = first * (seg == 0)[:, None, :, None]
    rhs = beta.unsqueeze(-1) * (v - (k * first) @ S)
    u = torch.linalg.solve_triangular(unit_lower(k, beta, G, seg), rhs, upper=False, unitriangular=True)
    o = scale * ((q * first) @ S + decayed(q, k, G, seg, 0) @ u)
    last = G[:, :, -1:]  # (B, H, 1, K|1)
    kept = k * (last - G).exp()
    carry = last.transpose(-2, -1).exp()  # (B, H, K|1, 1)
    if seg is not None:
        kept = kept * (seg == seg[:, -1:])[:, None, :, None]
        carry = carry * (seg[:, -1] == 0).view(-1, 1, 1, 1)
    return o, S * carry + kept.transpose(-2, -1) @ u


def parallel(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The whole sequence as one chunk: the implied weights times V, plus what a given state adds."""
    q, k, v, beta, g = prepared(q, k, v, beta, g)
    return one_chunk(q, k, v, beta, g, scale, initial_state(q, v, state), seg)
