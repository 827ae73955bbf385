"""Decayed scores, what a chunk of every decaying recurrence computes between its tokens (gated linear attention's
weights, the delta rule's I + L and its weights):

    D_ij = Σ_c a_ic b_jc exp(G_ic - G_jc)     for key j at or before query i (diagonal 0) or strictly before
                                              (diagonal -1), in i's document; else 0          (B, H, C, C)

G (B, H, C, K|1) is the cumulative log decay from the chunk's start, non-increasing along C. A decay per head
(K|1 = 1) factors out of the sum: (a bᵀ) ⊙ exp(G_i - G_j). A decay per key channel (GLA, Kimi Delta Attention)
does not, and the sum as written keeps a (C, C, K) tensor. Instead, as flash-linear-attention's kernels do, the
chunk is cut into sub-chunks of SUB tokens. A query i of sub-chunk I and a key j of an earlier one meet at r, I's
first token:

    exp(G_ic - G_jc) = exp(G_ic - G_rc) · exp(G_rc - G_jc)           each factor at most 1 (j < r <= i)

so the pair is a matrix product of a ⊙ exp(G - G_r) and b ⊙ exp(G_r - G), with nothing to overflow; inside a
sub-chunk the (SUB, SUB, K) sum as written. C·SUB·K exponentials inside and C²·K/SUB between, against C²·K.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SUB = 16  # tokens per sub-chunk (fla's BC)


def unseen(C: int, seg: Tensor | None, diagonal: int, device: torch.device) -> Tensor:
    """True where key j is not read by query i: after it (diagonal 0) or at or after it (-1), or in another
    document: (C, C), or (B, 1, C, C) with `seg` (B, C)."""
    after = torch.ones(C, C, dtype=torch.bool, device=device).triu(diagonal + 1)
    if seg is None:
        return after
    return after | (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1)


def decayed(a: Tensor, b: Tensor, G: Tensor, seg: Tensor | None = None, diagonal: int = 0) -> Tensor:
    """D (B, H, C, C) from a, b (B, H, C, K) and the cumulative log decay G (B, H, C, K|1), in one dtype."""
    C = a.shape[2]
    hidden = unseen(C, seg, diagonal, a.device)
    if G.shape[-1] == 1:  # one decay per head: the scores times the decay
        return (a @ b.transpose(-2, -1)) * (G - G.transpose(-2, -1)).masked_fill(hidden, float("-inf")).exp()
    if C <= SUB:
        return _inside(a, b, G).masked_fill(hidden, 0.0)
    return _sub_chunked(a, b, G).masked_fill(hidden, 0.0)


def _inside(a: Tensor, b: Tensor, G: Tensor) -> Tensor:
    """The sum as written, (.., C, C) from (.., C, K): a key after its query gets exp(-inf), not an overflow."""
    C = a.shape[-2]
    after = torch.ones(C, C, dtype=torch.bool, device=a.device).triu(1)
    gap = (G.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(after[..., None], float("-inf"))  # (.., C, C, K)
    return torch.einsum("...ik,...jk,...ijk->...ij", a, b, gap.exp())


def _sub_chunked(a: Tensor, b: Tensor, G: Tensor) -> Tensor:
    """D for every j <= i through sub-chunks (the module's docstring); entries with j > i are left as computed,
    finite, for the caller's mask. C is padded to a multiple of SUB (G carried flat: no decay)."""
    B, H, C, K = a.shape
    pad = -C % SUB
    a, b = F.pad(a, (0, 0, 0, pad)), F.pad(b, (0, 0, 0, pad))
    G = torch.cat((G, G[:, :, -1:].expand(B, H, pad, K)), dim=2)
    n, P = (C + pad) // SUB, C + pad
    G_sub = G.view(B, H, n, SUB, K)
    ref = G_sub[:, :, :, :1]  # (B, H, n, 1, K): each sub-chunk's first token
    queries = a.view(B, H, n, SUB, K) * (G_sub - ref).exp()  # exponent <= 0
    keys = b.unsqueeze(2) * (ref - G.unsqueeze(2)).clamp_max(0).exp()  # (B, H, n, P, K): every key, for each I
    between = (queries @ keys.transpose(-2, -1)).reshape(B, H, P, P)  # right where j's sub-chunk is before i's
    inside = _inside(a.view(B, H, n, SUB, K), b.view(B, H, n, SUB, K), G_sub)  # (B, H, n, SUB, SUB)
    eye = torch.eye(n, dtype=a.dtype, device=a.device)
    inside = torch.einsum("bhnij,nm->bhnimj", inside, eye).reshape(B, H, P, P)  # on the block diagonal
    block = torch.arange(P, device=a.device) // SUB
    same = block.unsqueeze(1) == block.unsqueeze(0)
    return torch.where(same, inside, between)[:, :, :C, :C]
