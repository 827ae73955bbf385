"""The triton forward kernel (andrea.attention.backends.flash_kernels): a block of queries walks the keys with
the running maximum, sum and weighted values, and saves the log-sum-exp the backward recomputes p from."""

import triton
import triton.language as tl

from andrea.attention.backends.flash_loads import LN2, _kv_block, _query_block, _scores
from andrea.attention.backends.flash_masks import _allowed, _key_blocks


@triton.jit
def _forward_step(
    acc, l_i, m_i, q, Kh, Vh, k_st, v_st, start_n, b, h, offs_m, q_pos, slope,
    Lengths, Docs, Dense, dense_sb, dense_sh, dense_st, scale, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, CAP: tl.constexpr, SIGMOID: tl.constexpr,
    BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, MASKED: tl.constexpr, EVEN_D: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The running (acc, l, m) after the key block at start_n; without MASKED, a block seen whole."""
    k_pos = start_n + tl.arange(0, BLOCK_N)
    k, v, _ = _kv_block(Kh, Vh, k_pos, k_st, v_st, S, D, UPCAST, BLOCK_D, not MASKED, EVEN_D)  # (BLOCK_N, BLOCK_D)
    if MASKED:  # the mask before the scores: its loads (documents, a dense tile) overlap the product
        allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
                           prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, False)  # fmt: skip
        s = tl.where(
            allowed, _scores(q, k, q_pos, k_pos, slope, scale, HAS_ALIBI, CAP, PRECISION, not SIGMOID), float("-inf")
        )
    else:
        s = _scores(q, k, q_pos, k_pos, slope, scale, HAS_ALIBI, CAP, PRECISION, not SIGMOID)  # base 2 for softmax
    if SIGMOID:  # each weight on its own (a masked score is -inf: weight 0): no running max, no sum
        acc += tl.dot(tl.sigmoid(s + BIAS).to(v.dtype), v, input_precision=PRECISION)
        m_new = m_i
    else:
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = m_new
        if MASKED:  # a row with no key yet: exp(-inf) = 0, not NaN (a whole block gives every row a finite score)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])  # this block's weights, unnormalised
        alpha = tl.exp2(m_i - m_safe)  # shrink what was summed under the old max
        l_i = alpha * l_i + tl.sum(p, axis=1)
        acc = alpha[:, None] * acc + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return acc, l_i, m_new


@triton.jit
def attention_forward(
    Q, K, V, Out, LSE, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, CAP: tl.constexpr, SIGMOID: tl.constexpr,
    BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK_M queries of head h of sequence b. Writes out (BLOCK_M, d) and lse (BLOCK_M,)."""
    bh, b, h, start_m, Kh, Vh, offs_m, q_pos, row_ok, tile, tile_ok, q = _query_block(
        Q, K, V, q_sb, q_sh, q_st, k_sb, k_sh, v_sb, v_sh, H, group, T, S, D, UPCAST, BLOCK_M, BLOCK_D
    )
    slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of the scores (-inf: none seen yet)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp(score - m_i)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running sum of exp(score - m_i) · v
    lo, whole_lo, whole_hi, hi = _key_blocks(start_m, T, S, Lengths, b, prefix, window, CAUSAL, BAND, HAS_LENGTHS,
                                             HAS_DOCS, HAS_DENSE, BLOCK_M, BLOCK_N)  # fmt: skip
    # the blocks before the whole ones (a window's edge), the whole ones, the blocks after (the diagonal, the end)
    for start_n in range(lo, whole_lo, BLOCK_N):
        acc, l_i, m_i = _forward_step(
            acc, l_i, m_i, q, Kh, Vh, k_st, v_st, start_n, b, h, offs_m, q_pos, slope,
            Lengths, Docs, Dense, dense_sb, dense_sh, dense_st, scale, T, S, D, prefix, window,
            CAUSAL, BAND, HAS_ALIBI, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, CAP, SIGMOID, BIAS, PRECISION, UPCAST,
            True, EVEN_D, BLOCK_N, BLOCK_D,
        )  # fmt: skip
    if not (HAS_DOCS or HAS_DENSE):  # documents, a dense mask: every block is an edge block
        for start_n in range(whole_lo, whole_hi, BLOCK_N):
            acc, l_i, m_i = _forward_step(
                acc, l_i, m_i, q, Kh, Vh, k_st, v_st, start_n, b, h, offs_m, q_pos, slope,
                Lengths, Docs, Dense, dense_sb, dense_sh, dense_st, scale, T, S, D, prefix, window,
                CAUSAL, BAND, HAS_ALIBI, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, CAP, SIGMOID, BIAS, PRECISION, UPCAST,
                False, EVEN_D, BLOCK_N, BLOCK_D,
            )  # fmt: skip
        for start_n in range(whole_hi, hi, BLOCK_N):
            acc, l_i, m_i = _forward_step(
                acc, l_i, m_i, q, Kh, Vh, k_st, v_st, start_n, b, h, offs_m, q_pos, slope,
                Lengths, Docs, Dense, dense_sb, dense_sh, dense_st, scale, T, S, D, prefix, window,
                CAUSAL, BAND, HAS_ALIBI, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, CAP, SIGMOID, BIAS, PRECISION, UPCAST,
                True, EVEN_D, BLOCK_N, BLOCK_D,
            )  # fmt: skip

    seen = l_i > 0  # a row that saw no key gives zeros, and lse = +inf makes its backward p = 0
    # sigmoid: the weighted values themselves, unnormalised
    out = acc if SIGMOID else tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
    tl.store(Out + tile, out.to(Out.dtype.element_ty), mask=tile_ok)
    tl.store(
        LSE + bh * T + offs_m,
        tl.where(seen, (m_i + tl.log2(tl.where(seen, l_i, 1.0))) * LN2, float("inf")),
        mask=row_ok,
    )
