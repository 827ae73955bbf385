"""Gated linear attention, the recurrence under linear attention, retention, GLA and Mamba-2 (MIXERS.md):

    S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ        S (K, V) per head; g_t <= 0 the log decay, per key channel
    o_t = S_tᵀ (scale · q_t)                        (a scalar per head is the same decay on every channel)

in three forms that compute the same function (docs/spec.md):

    recurrent(q, k, v, g)   one token at a time from a fixed-size state: what generation runs
    parallel(q, k, v, g)    the implied weights A_ij = Σ_c q_ic k_jc exp(G_ic - G_jc), j <= i (G = cumsum g),
                            times V: a (T, T) matrix per head, the maps' weights
    chunked(q, k, v, g)     the parallel form inside chunks of C tokens, the state carried across them:
                            O(T·C·K + T·K·V), linear in T

q, k (B, H, T, K), v (B, H, T, V), g (B, H, T, K) or (B, H, T) (one decay per head and token), the state
(B, H, K, V). Packed documents: `seg` (B, T) numbers each token's document from 0, the one the given state
belongs to; where it changes the state restarts from zero (S_{t-1} is dropped), so a document never reads
another's tokens (andrea.mixers.state_masks).

Decays stay in log space and their cumulative sums, like the state, are computed in float32 at least (float64
stays float64): a product of many decays is never formed outside an exponent of a difference that is at most 0.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

CHUNK = 64  # tokens per chunk of the chunked form


def _prepared(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """q, k, v and the log decay in the working dtype (float32 at least), the decay (B, H, T, K) or (B, H, T, 1)."""
    dtype = torch.promote_types(q.dtype, torch.float32)
    if g is None:
        g = q.new_zeros(q.shape[:3])
    g = g if g.dim() == 4 else g.unsqueeze(-1)
    return q.to(dtype), k.to(dtype), v.to(dtype), g.to(dtype)


def _state(q: Tensor, v: Tensor, state: Tensor | None) -> Tensor:
    B, H, _, K = q.shape
    fresh = q.new_zeros(B, H, K, v.shape[-1])
    return fresh if state is None else state.to(q.dtype)


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The recurrence as written, token by token: (o (B, H, T, V), the final state (B, H, K, V))."""
    q, k, v, g = _prepared(q, k, v, g)
    S, out = _state(q, v, state), []
    for t, (q_t, k_t, v_t, g_t) in enumerate(tokens(q, k, v, g)):
        decay = g_t.exp().unsqueeze(-1)  # (B, H, K|1, 1)
        if seg is not None:  # a new document: the state restarts
            decay = decay * (seg[:, t] == (seg[:, t - 1] if t else 0)).view(-1, 1, 1, 1)
        S = S * decay + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)  # (B, H, K, V)
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, dim=2), S


def tokens(*xs: Tensor) -> Iterator[tuple[Tensor, ...]]:
    """The tensors' tokens (dim 2) side by side, one token each step. `unbind`, not indexing: the backward of
    T indexed views would write T gradients the size of the whole sequence, O(T²); unbind's stacks them once."""
    return zip(*(x.unbind(2) for x in xs), strict=True)


def chunk_padding(length: int, chunk: int) -> tuple[int, int]:
    """The chunk's length and the tokens padded to fill the last one: a sequence shorter than a chunk is one chunk
    of its own length, not padded to a whole one."""
    chunk = max(1, min(chunk, length))
    return chunk, -length % chunk


def chunks(
    length: int, chunk: int, seg: Tensor | None, *xs: Tensor
) -> Iterator[tuple[Tensor | None, tuple[Tensor, ...]]]:
    """The tensors (dim 2, `length` tokens, a multiple of `chunk`) in chunks side by side, each chunk's tokens'
    documents first (`_documents`). `split`, not slicing, for the reason `tokens` gives."""
    pieces = zip(*(x.split(chunk, dim=2) for x in xs), strict=True)
    return zip(_documents(length, chunk, seg), pieces, strict=True)


def weights(q: Tensor, k: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None) -> Tensor:
    """The implied weights (B, H, T, T): A_ij = scale · Σ_c q_ic k_jc exp(G_ic - G_jc) for j <= i in i's
    document, else 0."""
    q, k, _, g = _prepared(q, k, q, g)
    return _weights(q, k, g.cumsum(dim=2), scale, seg)


def _weights(q: Tensor, k: Tensor, G: Tensor, scale: float, seg: Tensor | None) -> Tensor:
    """`weights` from the cumulative log decay G (B, H, T, K|1), inputs already in the working dtype."""
    T = q.shape[2]
    unseen = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # key after query
    if seg is not None:  # or in another document: (B, 1, T, T)
        unseen = unseen | (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1)
    gap = (G.unsqueeze(3) - G.unsqueeze(2)).masked_fill(unseen[..., None], float("-inf"))  # (B, H, T, T, K|1)
    if G.shape[-1] == 1:  # one decay per head: the scores times the decay, no (T, T, K) product
        return (q * scale) @ k.transpose(-2, -1) * gap.squeeze(-1).exp()
    return torch.einsum("bhik,bhjk,bhijk->bhij", q * scale, k, gap.exp())


def parallel(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The implied weights times V, plus what a given state adds, with the final state: the chunked form as
    one chunk of T tokens."""
    q, k, v, g = _prepared(q, k, v, g)
    return _chunk(q, k, v, g, scale, _state(q, v, state), seg)


def chunked(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, scale: float = 1.0, state: Tensor | None = None,
    seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Chunks of `chunk` tokens (T padded inside to a multiple), each the parallel form from the state the chunks
    before it left: (o (B, H, T, V), the final state)."""
    q, k, v, g = _prepared(q, k, v, g)
    T = q.shape[2]
    chunk, pad = chunk_padding(T, chunk)  # padded tokens: k = v = 0 and no decay leave the state as it was
    q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
    S, out = _state(q, v, state), []
    for here, (q_c, k_c, v_c, g_c) in chunks(T + pad, chunk, seg, q, k, v, g):
        o, S = _chunk(q_c, k_c, v_c, g_c, scale, S, here)
        out.append(o)
    return torch.cat(out, dim=2)[:, :, :T], S


def _documents(length: int, chunk: int, seg: Tensor | None) -> Iterator[Tensor | None]:
    """Each chunk's tokens' documents, of a sequence padded to `length` (a multiple of `chunk`), numbered again
    from 0 at its start (0: the document of the state it starts from; padding stays in the last)."""
    if seg is not None:
        seg = torch.cat((seg, seg[:, -1:].expand(-1, length - seg.shape[1])), dim=1)
    for start in range(0, length, chunk):
        yield None if seg is None else seg[:, start : start + chunk] - (seg[:, start - 1 : start] if start else 0)


def _chunk(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float, S: Tensor, seg: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One chunk from the state before it: the weights inside it times V, plus the decayed state read by the
    queries; and the state after it. G, the cumulative log decay from the chunk's start, is <= 0. With `seg`,
    only the queries of document 0 read the state, and only the last document's keys are carried."""
    G = g.cumsum(dim=2)  # (B, H, C, K|1)
    inside = _weights(q, k, G, scale, seg) @ v  # (B, H, C, V)
    read, last = q * scale * G.exp(), G[:, :, -1:]  # the state decayed to each query; the whole chunk's decay
    kept = k * (last - G).exp()  # k_j exp(G_last - G_j)
    carry = last.transpose(-2, -1).exp()  # (B, H, K|1, 1)
    if seg is not None:
        read = read * (seg == 0)[:, None, :, None]
        kept = kept * (seg == seg[:, -1:])[:, None, :, None]
        carry = carry * (seg[:, -1] == 0).view(-1, 1, 1, 1)
    return inside + read @ S, S * carry + kept.transpose(-2, -1) @ v


FORMS = ("parallel", "chunked", "recurrent")  # mixer.form


def run(
    form: str, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, scale: float, state: Tensor | None,
    seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The recurrence in the form named (one of FORMS), chunks of `chunk` tokens for the chunked one; outside any
    autocast, so that under bfloat16 autocast the products, the cumulative decays and the state stay float32."""
    with torch.autocast(q.device.type, enabled=False):
        if form == "chunked":
            return chunked(q, k, v, g, scale, state, seg, chunk)
        return {"parallel": parallel, "recurrent": recurrent}[form](q, k, v, g, scale, state, seg)
