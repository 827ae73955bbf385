"""The delta rule, the recurrence under DeltaNet and Gated DeltaNet (MIXERS.md): the state is corrected toward
each new value instead of added to,

    S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ      S (K, V) per head; β_t in (0, 1); α_t = exp(g_t) <= 1
    o_t = S_tᵀ (scale · q_t)                                 (DeltaNet: no decay, g = 0)

that is u_t = β_t (v_t - (α_t S_{t-1})ᵀ k_t), the part of v_t the state does not yet predict, and
S_t = α_t S_{t-1} + k_t u_tᵀ. In three forms that compute one function (andrea.mixers.gated_linear's shapes and
conventions: q, k (B, H, T, K), v (B, H, T, V), β and g (B, H, T), the state (B, H, K, V), `seg` packed
documents):

    recurrent   token by token: what generation runs
    chunked     chunks of C tokens (the WY/UT form): inside one, with G the cumulative log decay from its start,
                Γ_ij = exp(G_i - G_j) and L = strict_tril(diag(β) (K Kᵀ ⊙ Γ)),
                U = (I + L)⁻¹ diag(β) (V - diag(exp G) K S_0)       (a triangular solve, no inverse formed)
                O = scale (diag(exp G) Q S_0 + tril(Q Kᵀ ⊙ Γ) U),  S_C = exp(G_C) S_0 + Kᵀ diag(exp(G_C - G)) U
    parallel    one chunk of T tokens: the implied weights A = scale tril(Q Kᵀ ⊙ Γ)(I + L)⁻¹ diag(β) times V,
                signed (the maps say so)

Decays stay in log space, and the working dtype is float32 at least, outside any autocast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from andrea.mixers.gated_linear import CHUNK, FORMS, chunk_padding, chunks, tokens

__all__ = ["CHUNK", "FORMS", "chunked", "parallel", "recurrent", "run", "weights"]


def _prepared(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None) -> tuple[Tensor, ...]:
    dtype = torch.promote_types(q.dtype, torch.float32)
    g = q.new_zeros(q.shape[:3]) if g is None else g
    return tuple(x.to(dtype) for x in (q, k, v, beta, g))


def _state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    B, H, _, K = q.shape
    return q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Token by token: (o (B, H, T, V), the final state (B, H, K, V))."""
    q, k, v, beta, g = _prepared(q, k, v, beta, g)
    S, out = _state(q, v, state), []
    for t, (q_t, k_t, v_t, beta_t, g_t) in enumerate(tokens(q, k, v, beta, g)):
        decay = g_t.exp()  # (B, H)
        if seg is not None:  # a new document: the state restarts
            decay = decay * (seg[:, t] == (seg[:, t - 1] if t else 0)).view(-1, 1)
        S = decay[..., None, None] * S
        u = beta_t.unsqueeze(-1) * (v_t - torch.einsum("bhkv,bhk->bhv", S, k_t))
        S = S + k_t.unsqueeze(-1) * u.unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, dim=2), S


def _gaps(G: Tensor, seg: Tensor | None, diagonal: int) -> Tensor:
    """exp(G_i - G_j) for key j at or before query i (diagonal 0) or strictly before (-1), in its document;
    else 0: (B, H, C, C)."""
    C = G.shape[2]
    unseen = torch.ones(C, C, dtype=torch.bool, device=G.device).triu(diagonal + 1)
    if seg is not None:
        unseen = unseen | (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1)
    return (G.unsqueeze(3) - G.unsqueeze(2)).masked_fill(unseen, float("-inf")).exp()


def _unit_lower(k: Tensor, beta: Tensor, G: Tensor, seg: Tensor | None) -> Tensor:
    """I + L, L = strict_tril(diag(β) (K Kᵀ ⊙ Γ)): unit lower triangular, (B, H, C, C)."""
    L = beta.unsqueeze(-1) * (k @ k.transpose(-2, -1)) * _gaps(G, seg, -1)
    return L + torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)


def _chunk(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One chunk from the state before it (the module's docstring); with `seg`, only document 0 reads S_0 and
    only the last document's keys are carried."""
    G = g.cumsum(dim=2)  # (B, H, C)
    first = G.exp().unsqueeze(-1)  # (B, H, C, 1): how much of S_0 reaches each token
    if seg is not None:
        first = first * (seg == 0)[:, None, :, None]
    rhs = beta.unsqueeze(-1) * (v - first * (k @ S))
    u = torch.linalg.solve_triangular(_unit_lower(k, beta, G, seg), rhs, upper=False, unitriangular=True)
    o = scale * (first * (q @ S) + ((q @ k.transpose(-2, -1)) * _gaps(G, seg, 0)) @ u)
    last = G[:, :, -1:]  # (B, H, 1)
    kept = k * (last - G).exp().unsqueeze(-1)
    carry = last.exp().unsqueeze(-1)  # (B, H, 1, 1)
    if seg is not None:
        kept = kept * (seg == seg[:, -1:])[:, None, :, None]
        carry = carry * (seg[:, -1] == 0).view(-1, 1, 1, 1)
    return o, S * carry + kept.transpose(-2, -1) @ u


def parallel(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The whole sequence as one chunk: the implied weights times V, plus what a given state adds."""
    q, k, v, beta, g = _prepared(q, k, v, beta, g)
    return _chunk(q, k, v, beta, g, scale, _state(q, v, state), seg)


def chunked(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0,
    state: Tensor | None = None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside: k = 0 and no decay leave the state as it was)."""
    q, k, v, beta, g = _prepared(q, k, v, beta, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    S, out = _state(q, v, state), []
    for here, (q_c, k_c, v_c, beta_c, g_c) in chunks(T + pad, chunk, seg, q, k, v, beta, g):
        o, S = _chunk(q_c, k_c, v_c, beta_c, g_c, scale, S, here)
        out.append(o)
    return torch.cat(out, dim=2)[:, :, :T], S


def weights(
    q: Tensor, k: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None
) -> Tensor:
    """The implied weights (B, H, T, T): scale tril(Q Kᵀ ⊙ Γ)(I + L)⁻¹ diag(β), signed."""
    q, k, _, beta, g = _prepared(q, k, q, beta, g)
    G = g.cumsum(dim=2)
    lower = _unit_lower(k, beta, G, seg)
    eye = torch.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand_as(lower)
    inverse = torch.linalg.solve_triangular(lower, eye, upper=False, unitriangular=True)
    return scale * ((q @ k.transpose(-2, -1)) * _gaps(G, seg, 0)) @ inverse * beta.unsqueeze(-2)


def run(
    form: str, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None, scale: float,
    state: Tensor | None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The delta rule in the form named (one of FORMS), outside any autocast (float32 products and state)."""
    with torch.autocast(q.device.type, enabled=False):
        if form == "chunked":
            return chunked(q, k, v, beta, g, scale, state, seg, chunk)
        return {"parallel": parallel, "recurrent": recurrent}[form](q, k, v, beta, g, scale, state, seg)
