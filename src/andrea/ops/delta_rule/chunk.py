"""The delta rule in chunks, the WY/UT form (andrea.ops.delta_rule's docstring has the equations): inside a
chunk a triangular solve, across chunks the state, linear in T; and the parallel form, the whole sequence as one
chunk.

Every chunk's own part is computed at once, the chunks side by side (flash-linear-attention's order): the solve
gives each chunk W = (I + L)⁻¹ diag(β) diag(exp G) K and U' = (I + L)⁻¹ diag(β) V, so that from the state S before
it U = U' - W S, and its decayed q·k. The loop across chunks then only reads and writes the state, three small
products a chunk."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.ops.decayed import across, decayed
from andrea.ops.delta_rule.implied import unit_lower
from andrea.ops.delta_rule.inputs import initial_state, prepared
from andrea.ops.sequence import CHUNK, chunk_padding, side_by_side, tokens


def chunked(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside: k = 0 and no decay leave the state as it was)."""
    q, k, v, beta, g = prepared(q, k, v, beta, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)
    q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
    docs, (q_n, k_n, v_n, beta_n, g_n) = side_by_side(T + pad, chunk, seg, q, k, v, F.pad(beta, (0, pad)), g)
    o, S = across_chunks(q_n, k_n, v_n, beta_n, g_n, scale, initial_state(q, v, state), docs)
    return o.flatten(2, 3)[:, :, :T], S


def across_chunks(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Chunks side by side, q, k (B, H, n, C, K), v (B, H, n, C, V), β (B, H, n, C), g (B, H, n, C, K|1), from the
    state before the first (andrea.ops.delta_rule's docstring); with `seg` (B, n, C), each chunk's documents from
    0: only document 0 reads the state before its chunk, and only the last document's keys are carried."""
    G = g.cumsum(dim=3)
    first, kept, carry = across(G, seg)
    rhs = beta.unsqueeze(-1) * torch.cat((k * first, v), dim=-1)
    solved = torch.linalg.solve_triangular(unit_lower(k, beta, G, seg), rhs, upper=False, unitriangular=True)
    w, u = solved.split([k.shape[-1], v.shape[-1]], dim=-1)  # U = u - w S, given the state S before the chunk
    scores, read, kept = decayed(q, k, G, seg, 0), q * first, k * kept
    out = []
    for u_c, w_c, read_c, scores_c, carry_c, kept_c in tokens(u, w, read, scores, carry, kept):  # chunk by chunk
        U = u_c - w_c @ S
        out.append(read_c @ S + scores_c @ U)
        S = S * carry_c + kept_c.transpose(-2, -1) @ U
    return scale * torch.stack(out, dim=2), S


def parallel(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The whole sequence as one chunk: the implied weights times V, plus what a given state adds."""
    q, k, v, beta, g = prepared(q, k, v, beta, g)
    q_1, k_1, v_1, beta_1, g_1 = (x.unsqueeze(2) for x in (q, k, v, beta, g))
    docs = None if seg is None else seg.unsqueeze(1)
    o, S = across_chunks(q_1, k_1, v_1, beta_1, g_1, scale, initial_state(q, v, state), docs)
    return o.squeeze(2), S
