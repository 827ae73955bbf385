"""The triton backward kernels (andrea.attention.backends.flash_kernels): the δ = rowsum(do ⊙ out) pre-pass, dq
over the keys, and dk/dv over the query heads that share each kv head, scores taken transposed (k qᵀ)."""

import triton
import triton.language as tl

from andrea.attention.backends.flash_loads import (
    LOG2E,
    _capped_slope,
    _kv_block,
    _load,
    _query_block,
    _query_rows,
    _rows,
    _scores,
)
from andrea.attention.backends.flash_masks import _allowed, _key_blocks, _query_blocks


@triton.jit
def attention_backward_delta(Out, dOut, do_sb, do_sh, do_st, dLSE, Delta, H, T, D, HAS_DLSE: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    """The backward's pre-pass, one program per BLOCK_M rows of head bh: δ = rowsum(do ⊙ out) in float32, less
    the gradient that reached lse (dLSE) where HAS_DLSE. Writes Delta (BLOCK_M,)."""
    bh, start_m = tl.program_id(1).to(tl.int64), tl.program_id(0) * BLOCK_M
    offs_m, _, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, T, D, BLOCK_M, BLOCK_D)
    do = _load(dOut + (bh // H) * do_sb + (bh % H) * do_sh + _rows(offs_m, do_st, BLOCK_D), tile_ok, True)
    delta = tl.sum(_load(Out + tile, tile_ok, True) * do, axis=1)
    if HAS_DLSE:
        delta -= tl.load(dLSE + bh * T + offs_m, mask=row_ok, other=0.0)
    tl.store(Delta + bh * T + offs_m, delta, mask=row_ok)


@triton.jit
def attention_backward_dq(
    Q, K, V, dOut, dQ, LSE, Delta, do_sb, do_sh, do_st, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, CAP: tl.constexpr, SIGMOID: tl.constexpr,
    BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: dq for BLOCK_M queries of head h, walking the keys as the forward did, in one loop: the
    mask is built only in the edge blocks, behind a branch every thread takes alike (the forward's three
    loops cost dq more registers; docs/kernel_report.md)."""
    bh, b, h, start_m, Kh, Vh, offs_m, q_pos, row_ok, tile, tile_ok, q = _query_block(
        Q, K, V, q_sb, q_sh, q_st, k_sb, k_sh, v_sb, v_sh, H, group, T, S, D, UPCAST, BLOCK_M, BLOCK_D
    )
    do = _load(dOut + b * do_sb + h * do_sh + _rows(offs_m, do_st, BLOCK_D), tile_ok, UPCAST)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(Delta + bh * T + offs_m, mask=row_ok, other=0.0)  # rowsum(do ⊙ out)
    slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    lo, whole_lo, whole_hi, hi = _key_blocks(start_m, T, S, Lengths, b, prefix, window, CAUSAL, BAND, HAS_LENGTHS,
                                             HAS_DOCS, HAS_DENSE, BLOCK_M, BLOCK_N)  # fmt: skip
    for start_n in range(lo, hi, BLOCK_N):
        k_pos = start_n + tl.arange(0, BLOCK_N)
        k, v, _ = _kv_block(Kh, Vh, k_pos, k_st, v_st, S, D, UPCAST, BLOCK_D, False, EVEN_D)
        s = _scores(q, k, q_pos, k_pos, slope, scale, HAS_ALIBI, CAP, PRECISION, False)  # base e: base 2 spills here
        if CAP > 0:
            capped_slope = _capped_slope(s, CAP, False)
        if HAS_DOCS or HAS_DENSE or (start_n < whole_lo) | (start_n >= whole_hi):  # an edge block: the mask
            allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
                               prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, False)  # fmt: skip
            s = tl.where(allowed, s, float("-inf"))
        p = tl.sigmoid(s + BIAS) if SIGMOID else tl.exp(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
        ds = dp * p * (1.0 - p) if SIGMOID else p * (dp - delta[:, None])  # sigmoid's: each weight on its own
        if CAP > 0:  # through the cap: d cap·tanh(x / cap) = 1 - tanh²
            ds = ds * capped_slope
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    tl.store(dQ + tile, (dq * scale).to(dQ.dtype.element_ty), mask=tile_ok)


@triton.jit
def attention_backward_dkdv(
    Q, K, V, dOut, dK, dV, LSE, Delta, do_sb, do_sh, do_st, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh,
    dense_st, q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, CAP: tl.constexpr, SIGMOID: tl.constexpr,
    BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: dk, dv for BLOCK_N keys of kv head j, summed over the `group` query heads reading it.
    One loop over the query blocks, the mask built only in the edge ones behind a branch every thread takes
    alike (three loops, as the forward has, spill: a copy of k and v per loop; docs/kernel_report.md)."""
    bj, start_n = tl.program_id(1).to(tl.int64), tl.program_id(0) * BLOCK_N
    H_kv = H // group
    b, j = bj // H_kv, bj % H_kv
    k_pos = start_n + tl.arange(0, BLOCK_N)
    k, v, kv_ok = _kv_block(K + b * k_sb + j * k_sh, V + b * v_sb + j * v_sh, k_pos, k_st, v_st, S, D, UPCAST,
                            BLOCK_D, False, EVEN_D)  # fmt: skip
    kv_tile = bj * S * D + _rows(k_pos, D, BLOCK_D)  # dk's and dv's, contiguous

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    lo, whole_lo, whole_hi, hi = _query_blocks(start_n, T, S, Lengths, b, prefix, window, CAUSAL, BAND, HAS_LENGTHS,
                                               HAS_DOCS, HAS_DENSE, BLOCK_M, BLOCK_N)  # fmt: skip
    for h in range(j * group, (j + 1) * group):  # the query heads of this kv head's group
        bh = b * H + h
        slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0
        for start_m in range(lo, hi, BLOCK_M):
            offs_m, q_pos, row_ok, _, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
            q = _load(Q + b * q_sb + h * q_sh + _rows(offs_m, q_st, BLOCK_D), tile_ok, UPCAST)
            do = _load(dOut + b * do_sb + h * do_sh + _rows(offs_m, do_st, BLOCK_D), tile_ok, UPCAST)
            lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
            delta = tl.load(Delta + bh * T + offs_m, mask=row_ok, other=0.0)
            # keys down the rows, queries across (k qᵀ): p and ds come out as dv and dk take them, no transpose
            s_t = _scores(k, q, k_pos, q_pos, slope, scale, HAS_ALIBI, CAP, PRECISION, not SIGMOID)  # base 2: softmax
            if CAP > 0:
                capped_slope = _capped_slope(s_t, CAP, True)
            if (start_m < whole_lo) | (start_m >= whole_hi):  # an edge block: the mask
                allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh,
                                   dense_st, prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE,
                                   True)  # fmt: skip
                s_t = tl.where(allowed, s_t, float("-inf"))
            p_t = tl.sigmoid(s_t + BIAS) if SIGMOID else tl.exp2(s_t - lse[None, :] * LOG2E)  # (BLOCK_N, BLOCK_M)
            dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)  # (BLOCK_N, BLOCK_D)
            dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # (BLOCK_N, BLOCK_M)
            ds_t = dp_t * p_t * (1.0 - p_t) if SIGMOID else p_t * (dp_t - delta[None, :])  # d sigmoid = p (1 - p)
            if CAP > 0:
                ds_t = ds_t * capped_slope
            dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
    tl.store(dK + kv_tile, (dk * scale).to(dK.dtype.element_ty), mask=kv_ok)
    tl.store(dV + kv_tile, dv.to(dV.dtype.element_ty), mask=kv_ok)
