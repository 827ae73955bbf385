"""sparsemax: attention weights that are exactly 0 for most keys (Martins & Astudillo, ICML 2016, "From Softmax
to Sparsemax: A Sparse Model of Attention and Multi-Label Classification").

    A_i = sparsemax(s_i) = argmin_{p in simplex} ||p - s_i||²       s_ij = q_i·k_j / sqrt(d) + bias
        = max(s_ij - τ_i, 0),  τ_i such that the row sums to 1

With the row's scores sorted, z_(1) >= z_(2) >= ..., the support is the largest k with 1 + k z_(k) > Σ_{j<=k} z_(j),
and τ = (Σ_{j<=k} z_(j) - 1) / k (the paper's Algorithm 1). Masked keys take no weight; a row with none is 0.

`normalise` is what andrea's eager and naive backends run (the sort); `formula` is the same math found another
way, on its own, for the conformance kit to prove them against: τ by bisection on Σ max(s - τ, 0) = 1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ScoreMod


class Sparsemax(Mechanism):
    name = "sparsemax"
    kernel = "sparsemax"  # its own math: only the backends that run any mechanism's dense form (eager, naive)
    weights_meaning = "sparsemax weights (each row sums to 1; most are exactly 0)"

    # The support is decided by differences between scores that bfloat16's 8 bits blur: scores are formed and
    # normalised in float32 at least, whatever the inputs, and the weights go back to the inputs' dtype.
    def weights(self, q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None) -> Tensor:
        return super().weights(q.float(), k.float(), mask, scale, score_mod).to(q.dtype)

    def head_weights(
        self, q_h: Tensor, k_h: Tensor, scale: float, bias_h: Tensor | None, allowed_h: Tensor | None,
        attends_self: bool, head: int,
    ) -> Tensor:  # fmt: skip
        bias = None if bias_h is None else bias_h.float()
        return super().head_weights(q_h.float(), k_h.float(), scale, bias, allowed_h, attends_self, head).to(q_h.dtype)

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        """scores (..., S) -> sparsemax over the allowed keys (..., S), by sorting each row."""
        dtype, scores = scores.dtype, scores.float()
        if allowed is None:
            shifted = scores - scores.amax(dim=-1, keepdim=True)  # the top score at 0: then τ lies in [-1, 0)
        else:
            top = scores.masked_fill(~allowed, float("-inf")).amax(dim=-1, keepdim=True)
            top = torch.where(torch.isfinite(top), top, 0.0)  # a row that sees no key
            shifted = (scores - top).masked_fill(~allowed, -2.0)  # under any τ: no weight, and finite gradients
        z, _ = shifted.sort(dim=-1, descending=True)  # (..., S)
        k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
        running = z.cumsum(dim=-1)  # Σ_{j<=k} z_(j)
        size = (1 + k * z > running).sum(dim=-1, keepdim=True)  # k(z) >= 1: the first key always qualifies
        tau = (running.gather(-1, size - 1) - 1) / size.to(z.dtype)
        weights = (shifted - tau).clamp(min=0)
        return (weights if allowed is None else weights.masked_fill(~allowed, 0.0)).to(dtype)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        """The projection's own characterisation: τ with Σ max(s - τ, 0) = 1, by bisection (no sort); then the
        weights max(s - τ, 0) with τ exact on the support it found."""
        s = q @ k.transpose(-2, -1) * scale + (0.0 if bias is None else bias)  # (B, H, T, S)
        s = s.masked_fill(~allowed, float("-inf"))
        with torch.no_grad():
            low = s.amax(dim=-1, keepdim=True).nan_to_num(0.0, neginf=0.0) - 1  # Σ >= 1 at τ = max - 1
            high = low + 1  # ... and 0 at τ = max
            for _ in range(100):
                tau = (low + high) / 2
                above = (s - tau).clamp(min=0).sum(dim=-1, keepdim=True) > 1  # Σ falls as τ grows
                low, high = torch.where(above, tau, low), torch.where(above, high, tau)
            support = s > low  # the keys above τ
        size = support.sum(dim=-1, keepdim=True).clamp(min=1)
        tau = (s.masked_fill(~support, 0.0).sum(dim=-1, keepdim=True) - 1) / size
        weights = (s - tau).clamp(min=0).masked_fill(~allowed, 0.0)
        return weights * allowed.any(dim=-1, keepdim=True)  # a row that sees no key: 0
