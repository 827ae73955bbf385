"""The triton backend's kernels: FlashAttention-2 in Triton, every (batch, head) in one launch.

Read with the lesson's math beside it (docs/spec.md §1-2). For one head, a block of BLOCK_M
queries walks the keys BLOCK_N at a time and keeps three running values per query row: the
largest score seen so far m (m_i in the code), the sum l of exp(score - m) (l_i), and the
weighted values acc.

    s     = q kᵀ · scale  (+ ALiBi's -slope_h·|i - j|),  -inf where the mask says no   (BLOCK_M, BLOCK_N)
    m_new = max(m, rowmax(s))          the new running maximum
    p     = exp(s - m_new)             this block's weights, not yet normalised
    α     = exp(m - m_new)             rescales what was summed under the old maximum
    l     = α·l + rowsum(p)
    acc   = α·acc + p v
    out   = acc / l                    = softmax(s) v over every key, never holding a (T, S) matrix

The forward and dk/dv keep the scores in base 2 (s · log2 e, log2 e folded into the scale) and take
exp2, the GPU's own exponential, with no multiply per score; m is then in base 2 too, and lse is
stored in base e. dq keeps base e: base 2 costs it registers (docs/kernel_report.md).

The backward recomputes p from the log-sum-exp the forward saves (lse = m + log l, so
p = exp(s - lse)) rather than storing the weights, and with δ = rowsum(do ⊙ out):

    dv = pᵀ do     dp = do vᵀ     ds = p ⊙ (dp - δ)     dq = ds k · scale     dk = dsᵀ q · scale

δ comes from a pre-pass of its own (`attention_backward_delta`). dk/dv computes its scores transposed,
k qᵀ (keys down the rows), so pᵀ and dsᵀ come out as its dots take them, with no transpose.

Grids: the forward and dq run one program per (batch x head, query block), the last query block first
(causal: the heaviest); dk and dv one per (batch x kv head, key block), the first (the heaviest) first,
looping over the query heads that share that kv head (GQA, MQA: the shared k and v are read, never copied).
Query i sits at position S - T + i (queries are aligned to the end of the keys, as in the contract).
A row that sees no key gives zeros.

The mask is computed inside the kernel from its parameters (`_allowed`): causal with an optional
bidirectional prefix, a sliding window (one-sided or a band), key padding from the per-sequence
lengths, packed documents from the (B, S) document ids, and, for any other mask, a tile of its
dense (B|1, H|1, T, S) form. Key blocks the parameters rule out are skipped (`_key_range`,
`_query_range`). Blocks that every row of a tile sees whole (`_whole_keys`, `_whole_queries`: inside
the causal range, the window, the padding and the bounds; none where documents or a dense mask
decide) are computed with no mask at all, only the edge blocks around them build it: the forward
runs three loops (edge blocks, whole blocks loaded with no predicate when d fills BLOCK_D, edge
blocks), the backward kernels one loop with a branch every thread of a program takes alike.
q, k, v and do are (B, H, T, d) in any layout with a last stride of 1 (each kernel takes their strides:
views of a fused projection are read in place); what a kernel writes is contiguous. d is padded to BLOCK_D,
a power of two.
Offsets are int64 (from the program's (batch, head) index), so no size overflows them.
"""

from andrea.attention.backends.flash_backward import (
    attention_backward_delta,
    attention_backward_dkdv,
    attention_backward_dq,
)
from andrea.attention.backends.flash_forward import attention_forward

# the parts, in the order each imports the ones before it (andrea.attention.backends.loading.kernels)
PARTS = ("flash_masks", "flash_loads", "flash_forward", "flash_backward")
__all__ = ["attention_backward_delta", "attention_backward_dkdv", "attention_backward_dq", "attention_forward"]
