"""The diagonal-plus-low-rank recurrence in chunks (andrea.ops.dplr's docstring has the equations): every chunk's own
part at once, the chunks side by side (a triangular solve each), the state carried chunk by chunk; and the parallel
form, the whole sequence as one chunk."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.ops.decayed import across, decayed
from andrea.ops.dplr.inputs import checked_decay, initial_state, prepared
from andrea.ops.sequence import CHUNK, chunk_padding, side_by_side, tokens


def chunked(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside: k = a = b = 0 and no decay leave the state as it was)."""
    q, k, v, a, b, g = prepared(q, k, v, a, b, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)
    q, k, v, a, b, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, a, b, g))
    docs, (q_n, k_n, v_n, a_n, b_n, g_n) = side_by_side(T + pad, chunk, seg, q, k, v, a, b, g)
    o, S = across_chunks(q_n, k_n, v_n, a_n, b_n, g_n, scale, initial_state(q, v, state), docs)
    return o.flatten(2, 3)[:, :, :T], S


def across_chunks(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Chunks side by side, q, k, a, b, g (B, H, n, C, K), v (B, H, n, C, V), from the state before the first; with
    `seg` (B, n, C), each chunk's documents from 0: only document 0 reads the state before its chunk, and only the
    last document's keys are carried."""
    G = checked_decay(g).cumsum(dim=3)
    first, kept, carry = across(G, seg)
    a_before = a * (-g).exp()  # a'_t: exp(G_{t-1} - G_j) = exp(G_t - G_j) exp(-g_t)
    lower = torch.eye(q.shape[3], dtype=q.dtype, device=q.device) - decayed(a_before, b, G, seg, -1)
    rhs = torch.cat((a_before * first, decayed(a_before, k, G, seg, -1) @ v), dim=-1)
    solved = torch.linalg.solve_triangular(lower, rhs, upper=False, unitriangular=True)
    w, u = solved.split([k.shape[-1], v.shape[-1]], dim=-1)  # U = u + w S, given the state S before the chunk
    inside = decayed(q, k, G, seg, 0) @ v
    through, read = decayed(q, b, G, seg, 0), q * first
    kept_b = b * kept
    writes = (k * kept).transpose(-2, -1) @ v  # what each chunk's keys add to the state, (B, H, n, K, V)
    out = []
    for u_c, w_c, read_c, inside_c, through_c, carry_c, kept_c, write_c in tokens(
        u, w, read, inside, through, carry, kept_b, writes
    ):  # chunk by chunk
        U = u_c + w_c @ S
        out.append(read_c @ S + inside_c + through_c @ U)
        S = S * carry_c + write_c + kept_c.transpose(-2, -1) @ U
    return scale * torch.stack(out, dim=2), S


def parallel(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The whole sequence as one chunk: the implied weights times V, plus what a given state adds."""
    q, k, v, a, b, g = prepared(q, k, v, a, b, g)
    q_1, k_1, v_1, a_1, b_1, g_1 = (x.unsqueeze(2) for x in (q, k, v, a, b, g))
    docs = None if seg is None else seg.unsqueeze(1)
    o, S = across_chunks(q_1, k_1, v_1, a_1, b_1, g_1, scale, initial_state(q, v, state), docs)
    return o.squeeze(2), S
