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

The backward recomputes p from the log-sum-exp the forward saves (lse = m + log l, so
p = exp(s - lse)) rather than storing the weights, and with δ = rowsum(do ⊙ out):

    dv = pᵀ do     dp = do vᵀ     ds = p ⊙ (dp - δ)     dq = ds k · scale     dk = dsᵀ q · scale

Grids: the forward and dq run one program per (batch x head, query block); dk and dv one per
(batch x kv head, key block), looping over the query heads that share that kv head (GQA, MQA:
the shared k and v are read, never copied). Query i sits at position S - T + i (queries are
aligned to the end of the keys, as in the contract). A row that sees no key gives zeros.

The mask is computed inside the kernel from its parameters (`_allowed`): causal with an optional
bidirectional prefix, a sliding window (one-sided or a band), key padding from the per-sequence
lengths, packed documents from the (B, S) document ids, and, for any other mask, a tile of its
dense (B|1, H|1, T, S) form. Key blocks the parameters rule out are skipped (`_key_range`,
`_query_range`). Tensors are contiguous (B, H, T, d); d is padded to BLOCK_D, a power of two.
Offsets are int64 (from the program's (batch, head) index), so no size overflows them.
"""

import triton
import triton.language as tl


@triton.jit
def _allowed(
    b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
    HAS_DENSE: tl.constexpr,
):  # fmt: skip
    """(BLOCK_M, BLOCK_N): True where the query at q_pos may see the key at k_pos."""
    q, k = q_pos[:, None], k_pos[None, :]
    ok = (k < S) & (offs_m[:, None] < T)  # neither keys past the end nor query rows past the last
    if CAUSAL:  # causal, except that keys inside the prefix are seen by everyone (prefix-LM)
        ok = ok & ((k <= q) | (k < prefix))
    ok = ok & (q - k < window)  # no further back than the window (window = S + 1 when unbounded)
    if BAND:
        ok = ok & (k - q < window)  # nor further ahead: a symmetric band
    if HAS_LENGTHS:  # key padding: sequence b has `length` real tokens
        ok = ok & (k < tl.load(Lengths + b).to(tl.int32))
    if HAS_DOCS:  # packed documents: a query sees the keys of its own document only
        q_doc = tl.load(Docs + b * S + q_pos, mask=q_pos < S, other=-1)
        k_doc = tl.load(Docs + b * S + k_pos, mask=k_pos < S, other=-2)
        ok = ok & (q_doc[:, None] == k_doc[None, :])
    if HAS_DENSE:  # any other mask: its dense form, (B|1, H|1, T, S), one tile at a time
        row = b * dense_sb + h * dense_sh  # int64, as b and h are (from the program id)
        tile = Dense + row + offs_m[:, None] * dense_st + k_pos[None, :]
        ok = ok & (tl.load(tile, mask=ok, other=0) != 0)
    return ok


@triton.jit
def _key_range(q_first, q_last, S, Lengths, b, prefix, window,
               CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """The keys [lo, hi) queries q_first..q_last can see at all: blocks outside are skipped."""
    lo, hi = 0, S
    if CAUSAL:
        hi = tl.minimum(hi, tl.maximum(q_last + 1, prefix))
    lo = tl.maximum(lo, q_first - window + 1)
    if BAND:
        hi = tl.minimum(hi, q_last + window)
    if HAS_LENGTHS:
        hi = tl.minimum(hi, tl.load(Lengths + b).to(tl.int32))
    return (tl.maximum(lo, 0) // BLOCK_N) * BLOCK_N, hi


@triton.jit
def _query_range(k_first, k_last, T, S, prefix, window,
                 CAUSAL: tl.constexpr, BAND: tl.constexpr, BLOCK_M: tl.constexpr):  # fmt: skip
    """The query rows [lo, hi) that can see any key k_first..k_last: the backward's blocks."""
    offset = S - T  # query row i sits at position offset + i
    lo, hi = 0, T
    if CAUSAL:
        lo = tl.where(k_first < prefix, 0, k_first - offset)
    hi = tl.minimum(hi, k_last + window - offset)
    if BAND:
        lo = tl.maximum(lo, k_first - window + 1 - offset)
    return (tl.maximum(lo, 0) // BLOCK_M) * BLOCK_M, hi


@triton.jit
def _load(ptr, mask, UPCAST: tl.constexpr):
    """A tile of q, k, v or do, in float32 when UPCAST (Triton's CPU interpreter: its tl.dot misreads bfloat16)."""
    tile = tl.load(ptr, mask=mask, other=0.0)
    return tile.to(tl.float32) if UPCAST else tile


@triton.jit
def _query_rows(bh, start_m, T, S, D, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Query rows start_m .. start_m + BLOCK_M - 1 of head bh: their rows, positions among the keys,
    and the (BLOCK_M, BLOCK_D) tile of their q (or do, or out) with its in-bounds mask."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    tile = (bh * T + offs_m[:, None]) * D + offs_d[None, :]
    return offs_m, S - T + offs_m, row_ok, tile, row_ok[:, None] & (offs_d[None, :] < D)


@triton.jit
def _kv_block(K, V, kv, k_pos, S, D, UPCAST: tl.constexpr, BLOCK_D: tl.constexpr):
    """Keys and values at positions k_pos of kv head kv: two (BLOCK_N, BLOCK_D) tiles, the tile's offsets and mask."""
    offs_d = tl.arange(0, BLOCK_D)
    tile = (kv * S + k_pos[:, None]) * D + offs_d[None, :]
    ok = (k_pos[:, None] < S) & (offs_d[None, :] < D)
    return _load(K + tile, ok, UPCAST), _load(V + tile, ok, UPCAST), tile, ok


@triton.jit
def _scores(q, k, q_pos, k_pos, slope, scale, allowed, HAS_ALIBI: tl.constexpr, PRECISION: tl.constexpr):
    """s = q kᵀ · scale (+ ALiBi), -inf where not allowed: (BLOCK_M, BLOCK_N) in float32."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
    if HAS_ALIBI:
        s = s - slope * tl.abs(q_pos[:, None] - k_pos[None, :]).to(tl.float32)
    return tl.where(allowed, s, float("-inf"))


@triton.jit
def attention_forward(
    Q, K, V, Out, LSE, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK_M queries of head h of sequence b. Writes out (BLOCK_M, d) and lse (BLOCK_M,)."""
    bh, start_m = tl.program_id(0).to(tl.int64), tl.program_id(1) * BLOCK_M  # int64: offsets outgrow int32
    b, h = bh // H, bh % H
    kv = b * (H // group) + h // group  # the kv head this query head reads (h // group)
    offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
    q = _load(Q + tile, tile_ok, UPCAST)  # (BLOCK_M, BLOCK_D)
    slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of the scores
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp(score - m_i)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running sum of exp(score - m_i) · v
    lo, hi = _key_range(S - T + start_m, S - T + start_m + BLOCK_M - 1, S, Lengths, b, prefix, window,
                        CAUSAL, BAND, HAS_LENGTHS, BLOCK_N)  # fmt: skip
    for start_n in range(lo, hi, BLOCK_N):
        k_pos = start_n + tl.arange(0, BLOCK_N)
        k, v, _, _ = _kv_block(K, V, kv, k_pos, S, D, UPCAST, BLOCK_D)  # (BLOCK_N, BLOCK_D) each
        allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
                           prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE)  # fmt: skip
        s = _scores(q, k, q_pos, k_pos, slope, scale, allowed, HAS_ALIBI, PRECISION)  # (BLOCK_M, BLOCK_N)

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp(-inf) = 0, not NaN
        p = tl.exp(s - m_safe[:, None])  # this block's weights, unnormalised
        alpha = tl.exp(m_i - m_safe)  # shrink what was summed under the old max
        l_i = alpha * l_i + tl.sum(p, axis=1)
        acc = alpha[:, None] * acc + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new

    seen = l_i > 0  # a row that saw no key gives zeros, and lse = +inf makes its backward p = 0
    out = tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
    tl.store(Out + tile, out.to(Out.dtype.element_ty), mask=tile_ok)
    tl.store(LSE + bh * T + offs_m, tl.where(seen, m_i + tl.log(tl.where(seen, l_i, 1.0)), float("inf")), mask=row_ok)


@triton.jit
def attention_backward_dq(
    Q, K, V, dOut, dQ, LSE, Delta, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: dq for BLOCK_M queries of head h, walking the keys as the forward did."""
    bh, start_m = tl.program_id(0).to(tl.int64), tl.program_id(1) * BLOCK_M  # int64: offsets outgrow int32
    b, h = bh // H, bh % H
    kv = b * (H // group) + h // group
    offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
    q = _load(Q + tile, tile_ok, UPCAST)
    do = _load(dOut + tile, tile_ok, UPCAST)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(Delta + bh * T + offs_m, mask=row_ok, other=0.0)  # rowsum(do ⊙ out)
    slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    lo, hi = _key_range(S - T + start_m, S - T + start_m + BLOCK_M - 1, S, Lengths, b, prefix, window,
                        CAUSAL, BAND, HAS_LENGTHS, BLOCK_N)  # fmt: skip
    for start_n in range(lo, hi, BLOCK_N):
        k_pos = start_n + tl.arange(0, BLOCK_N)
        k, v, _, _ = _kv_block(K, V, kv, k_pos, S, D, UPCAST, BLOCK_D)
        allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
                           prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE)  # fmt: skip
        p = tl.exp(_scores(q, k, q_pos, k_pos, slope, scale, allowed, HAS_ALIBI, PRECISION) - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    tl.store(dQ + tile, (dq * scale).to(dQ.dtype.element_ty), mask=tile_ok)


@triton.jit
def attention_backward_dkdv(
    Q, K, V, dOut, dK, dV, LSE, Delta, Slopes, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    scale, H, group, T, S, D, prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_LENGTHS: tl.constexpr,
    HAS_DOCS: tl.constexpr, HAS_DENSE: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program: dk, dv for BLOCK_N keys of kv head j, summed over the `group` query heads reading it."""
    bj, start_n = tl.program_id(0).to(tl.int64), tl.program_id(1) * BLOCK_N
    H_kv = H // group
    b, j = bj // H_kv, bj % H_kv
    k_pos = start_n + tl.arange(0, BLOCK_N)
    k, v, kv_tile, kv_ok = _kv_block(K, V, bj, k_pos, S, D, UPCAST, BLOCK_D)

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    lo, hi = _query_range(start_n, start_n + BLOCK_N - 1, T, S, prefix, window, CAUSAL, BAND, BLOCK_M)
    for h in range(j * group, (j + 1) * group):  # the query heads of this kv head's group
        bh = b * H + h
        slope = tl.load(Slopes + h) if HAS_ALIBI else 0.0
        for start_m in range(lo, hi, BLOCK_M):
            offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
            q = _load(Q + tile, tile_ok, UPCAST)
            do = _load(dOut + tile, tile_ok, UPCAST)
            lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
            delta = tl.load(Delta + bh * T + offs_m, mask=row_ok, other=0.0)
            allowed = _allowed(b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
                               prefix, window, CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE)  # fmt: skip
            p = tl.exp(_scores(q, k, q_pos, k_pos, slope, scale, allowed, HAS_ALIBI, PRECISION) - lse[:, None])
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)  # (BLOCK_N, BLOCK_D)
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
    tl.store(dK + kv_tile, (dk * scale).to(dK.dtype.element_ty), mask=kv_ok)
    tl.store(dV + kv_tile, dv.to(dV.dtype.element_ty), mask=kv_ok)
