"""Decayed scores, what a chunk of every decaying recurrence computes between its tokens (gated linear attention's
weights, the delta rule's I + L and its weights):

    D_ij = Σ_c a_ic b_jc exp(G_ic - G_jc)     for key j at or before query i (diagonal 0) or strictly before
                                              (diagonal -1), in i's document; else 0          (B, H, C, C)

G (B, H, C, K|1) is the cumulative log decay from the chunk's start, non-increasing along C. A decay per head
(K|1 = 1) factors out of the sum: (a bᵀ) ⊙ exp(G_i - G_j). A decay per key channel (GLA, Kimi Delta Attention)
does not, and the sum as written keeps a (C, C, K) tensor, C²·K exponentials. About a reference token r before
both i and j,

    exp(G_ic - G_jc) = exp(G_ic - G_rc) · exp(G_rc - G_jc)

makes the pair a matrix product of a ⊙ exp(G - G_r) and b ⊙ exp(G_r - G). The first factor is at most 1 for i
after r, the second grows with the decay from r to j; and each carries the rounding of its exponent, about ε·|G -
G_r|, where the sum as written carries ε·|G_i - G_j|. So one reference serves a block only while its whole decay
stays within SPAN (a few parts in 10⁶ in float32, which the conformance kit's gradients notice past that).
Otherwise, as flash-linear-attention's kernels do, the block is cut into sub-chunks of SUB tokens: a query of
sub-chunk s and a key of an earlier one meet at s's first token, where both factors are at most 1 and their
exponents' rounding adds up to the pair's own; and each sub-chunk's own block is taken the same way again (in
sub-chunks of TINY), down to the (TINY, TINY, K) sum as written.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SUB, TINY = 16, 4  # tokens per sub-chunk (fla's BC), and per sub-chunk of a sub-chunk
SPAN = 10.0  # the most log decay across a block that one reference token takes


def unseen(C: int, seg: Tensor | None, diagonal: int, device: torch.device) -> Tensor:
    """True where key j is not read by query i: after it (diagonal 0) or at or after it (-1), or in another
    document: (C, C), or with `seg` (B, C) or (B, n, C) (chunks side by side) (B, 1, C, C) or (B, 1, n, C, C), the
    1 the heads' axis."""
    after = torch.ones(C, C, dtype=torch.bool, device=device).triu(diagonal + 1)
    if seg is None:
        return after
    return after | (seg.unsqueeze(-1) != seg.unsqueeze(-2)).unsqueeze(1)


def decayed(a: Tensor, b: Tensor, G: Tensor, seg: Tensor | None = None, diagonal: int = 0) -> Tensor:
    """D (.., C, C) from a, b (.., C, K) and the cumulative log decay G (.., C, K|1), in one dtype; the leading
    axes (B, H) or (B, H, n) for n chunks side by side."""
    C = a.shape[-2]
    hidden = unseen(C, seg, diagonal, a.device)
    if G.shape[-1] == 1:  # one decay per head: the scores times the decay
        return (a @ b.transpose(-2, -1)) * (G - G.transpose(-2, -1)).masked_fill(hidden, float("-inf")).exp()
    return _lower(a, b, G).masked_fill(hidden, 0.0)


def _lower(a: Tensor, b: Tensor, G: Tensor) -> Tensor:
    """D for every j <= i, (.., C, C); entries with j > i finite, for the caller's mask: one product about the
    block's first token where its decay allows, else sub-chunks, else the sum as written."""
    C = a.shape[-2]
    if (G[..., :1, :] - G[..., -1:, :]).max() <= SPAN:  # G is non-increasing: the first minus the last
        return _about_first(a, b, G)
    if C <= TINY:
        return _inside(a, b, G)
    return _sub_chunked(a, b, G, SUB if C > SUB else TINY)


def _about_first(a: Tensor, b: Tensor, G: Tensor) -> Tensor:
    """(a ⊙ exp(G - G_r)) (b ⊙ exp(G_r - G))ᵀ, r the block's first token: right for j <= i; finite (at most
    e^SPAN) elsewhere. The product does not depend on G_r, so no gradient flows through it (two that cancel,
    each as large as the sum, would leave only rounding)."""
    ref = G[..., :1, :].detach()
    return (a * (G - ref).exp()) @ (b * (ref - G).exp()).transpose(-2, -1)


def _inside(a: Tensor, b: Tensor, G: Tensor) -> Tensor:
    """The sum as written, (.., C, C) from (.., C, K): a key after its query gets exp(-inf), not an overflow."""
    C = a.shape[-2]
    after = torch.ones(C, C, dtype=torch.bool, device=a.device).triu(1)
    gap = (G.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(after[..., None], float("-inf"))  # (.., C, C, K)
    return torch.einsum("...ik,...jk,...ijk->...ij", a, b, gap.exp())


def _sub_chunked(a: Tensor, b: Tensor, G: Tensor, size: int) -> Tensor:
    """D for every j <= i through sub-chunks (the module's docstring), row block by row block: sub-chunk i's
    queries against the keys before it about i's first token, then its own block; zeros after. C is padded to a
    multiple of `size` (G carried flat: no decay)."""
    *lead, C, K = a.shape
    pad = -C % size
    a, b = F.pad(a, (0, 0, 0, pad)), F.pad(b, (0, 0, 0, pad))
    G = torch.cat((G, G[..., -1:, :].expand(*lead, pad, K)), dim=-2)
    n, P = (C + pad) // size, C + pad
    a_sub, b_sub, G_sub = (x.unflatten(-2, (n, size)) for x in (a, b, G))
    own = _lower(a_sub, b_sub, G_sub)  # (.., n, size, size): each sub-chunk's own block
    rows = []
    for i, (a_i, G_i, own_i) in enumerate(zip(a_sub.unbind(-3), G_sub.unbind(-3), own.unbind(-3), strict=True)):
        ref, start = G_i[..., :1, :].detach(), i * size  # sub-chunk i's first token (no gradient: see _about_first)
        queries = a_i * (G_i - ref).exp()  # exponents <= 0
        keys = b[..., :start, :] * (ref - G[..., :start, :]).exp()  # the keys before I: exponents <= 0
        after = a.new_zeros(*lead, size, P - start - size)
        rows.append(torch.cat((queries @ keys.transpose(-2, -1), own_i, after), dim=-1))
    return torch.cat(rows, dim=-2)[..., :C, :C]


def across(G: Tensor, seg: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """What the decay carries across chunks side by side, from G (B, H, n, C, K|1), the cumulative log decay from
    each chunk's start, and the chunks' documents `seg` (B, n, C), each from 0 (the one the state before the chunk
    belongs to): (first, kept, carry)

        first  exp(G) (B, H, n, C, K|1): how much of the state before the chunk reaches each token; 0 outside
               document 0
        kept   exp(G_last - G) (B, H, n, C, K|1): how much of each token's write reaches the state after it; 0
               outside the chunk's last document
        carry  exp(G_last)ᵀ (B, H, n, K|1, 1): how much of the state before reaches the state after; 0 where a
               document starts inside the chunk
    """
    last = G[..., -1:, :]
    first, kept, carry = G.exp(), (last - G).exp(), last.transpose(-2, -1).exp()
    if seg is not None:
        first = first * (seg == 0)[:, None, :, :, None]
        kept = kept * (seg == seg[..., -1:])[:, None, :, :, None]
        carry = carry * (seg[..., -1] == 0)[:, None, :, None, None]
    return first, kept, carry
