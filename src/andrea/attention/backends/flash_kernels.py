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

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e): scores are kept in base-2 units
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _allowed(
    b, h, offs_m, q_pos, k_pos, T, S, Lengths, Docs, Dense, dense_sb, dense_sh, dense_st,
    prefix, window,
    CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
    HAS_DENSE: tl.constexpr, TRANSPOSED: tl.constexpr,
):  # fmt: skip
    """(BLOCK_M, BLOCK_N), or with TRANSPOSED (BLOCK_N, BLOCK_M): True where the query at q_pos may see the key
    at k_pos."""
    if TRANSPOSED:  # keys down the rows, queries across: dk/dv's k qᵀ
        rows, q, k = offs_m[None, :], q_pos[None, :], k_pos[:, None]
    else:
        rows, q, k = offs_m[:, None], q_pos[:, None], k_pos[None, :]
    ok = (k < S) & (rows < T)  # neither keys past the end nor query rows past the last
    if CAUSAL:  # causal, except that keys inside the prefix are seen by everyone (prefix-LM)
        ok = ok & ((k <= q) | (k < prefix))
    ok = ok & (q - k < window)  # no further back than the window (window = S + 1 when unbounded)
    if BAND:
        ok = ok & (k - q < window)  # nor further ahead: a symmetric band
    if HAS_LENGTHS:  # key padding: sequence b has `length` real tokens
        ok = ok & (k < tl.load(Lengths + b).to(tl.int32))
    if HAS_DOCS:  # packed documents: a query sees the keys of its own document only
        q_doc = tl.load(Docs + b * S + q, mask=q < S, other=-1)
        k_doc = tl.load(Docs + b * S + k, mask=k < S, other=-2)
        ok = ok & (q_doc == k_doc)
    if HAS_DENSE:  # any other mask: its dense form, (B|1, H|1, T, S), one tile at a time
        row = b * dense_sb + h * dense_sh  # int64, as b and h are (from the program id)
        ok = ok & (tl.load(Dense + row + rows.to(tl.int64) * dense_st + k, mask=ok, other=0) != 0)  # int64: T·S > 2³¹
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
def _whole_keys(q_first, q_last, S, Lengths, b, prefix, window,
                CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
                HAS_DENSE: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """The key blocks [lo, hi), BLOCK_N-aligned and inside `_key_range`'s, that every query q_first..q_last sees
    whole: no mask test can bite there. None (lo = hi = S) where documents or a dense mask decide."""
    hi = S
    if CAUSAL:  # every key at or before the first query, or inside the prefix
        hi = tl.minimum(hi, tl.maximum(q_first + 1, prefix))
    if BAND:
        hi = tl.minimum(hi, q_first + window)
    if HAS_LENGTHS:
        hi = tl.minimum(hi, tl.load(Lengths + b).to(tl.int32))
    lo = tl.cdiv(tl.maximum(q_last - window + 1, 0), BLOCK_N) * BLOCK_N  # inside the last query's window
    hi = (tl.maximum(hi, 0) // BLOCK_N) * BLOCK_N
    if HAS_DOCS or HAS_DENSE:  # past every key: all blocks are edge blocks
        lo, hi = S, S
    return lo, tl.maximum(hi, lo)


@triton.jit
def _whole_queries(k_first, k_last, T, S, Lengths, b, prefix, window,
                   CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
                   HAS_DENSE: tl.constexpr, BLOCK_M: tl.constexpr):  # fmt: skip
    """The query blocks [lo, hi), BLOCK_M-aligned, whole rows, inside `_query_range`'s, that see every key
    k_first..k_last: the backward's blocks with no mask. None (lo = hi = T) where documents or a dense mask
    decide."""
    offset = S - T  # query row i sits at position offset + i
    lo, hi = 0, T
    if CAUSAL:  # the first query at or after the last key, unless every key is in the prefix
        lo = tl.where(k_last < prefix, 0, k_last - offset)
    hi = tl.minimum(hi, k_first + window - offset)  # the last query within the window of the first key
    if BAND:
        lo = tl.maximum(lo, k_last - window + 1 - offset)
    lo = tl.cdiv(tl.maximum(lo, 0), BLOCK_M) * BLOCK_M
    hi = (tl.maximum(hi, 0) // BLOCK_M) * BLOCK_M
    bound = S
    if HAS_LENGTHS:
        bound = tl.minimum(bound, tl.load(Lengths + b).to(tl.int32))
    hi = tl.where(k_last < bound, hi, lo)  # a key block past the end, or past the padding: every block masked
    if HAS_DOCS or HAS_DENSE:  # past every query: all blocks are edge blocks
        lo, hi = T, T
    return lo, tl.maximum(hi, lo)


@triton.jit
def _within(whole_lo, whole_hi, hi):
    """The whole blocks cut to end by hi (a range's end): lo <= whole_lo <= whole_hi <= hi, so that the loops
    [lo, whole_lo), [whole_lo, whole_hi), [whole_hi, hi) take every block once."""
    whole_lo = tl.minimum(whole_lo, hi)
    return whole_lo, tl.maximum(tl.minimum(whole_hi, hi), whole_lo)


@triton.jit
def _key_blocks(start_m, T, S, Lengths, b, prefix, window,
                CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
                HAS_DENSE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """(lo, whole_lo, whole_hi, hi): the keys the query block at start_m visits, [lo, hi), and within them
    the blocks it sees whole, [whole_lo, whole_hi)."""
    q_first, q_last = S - T + start_m, S - T + start_m + BLOCK_M - 1
    lo, hi = _key_range(q_first, q_last, S, Lengths, b, prefix, window, CAUSAL, BAND, HAS_LENGTHS, BLOCK_N)
    whole_lo, whole_hi = _whole_keys(q_first, q_last, S, Lengths, b, prefix, window,
                                     CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, BLOCK_N)  # fmt: skip
    whole_lo, whole_hi = _within(whole_lo, whole_hi, hi)
    return lo, whole_lo, whole_hi, hi


@triton.jit
def _query_blocks(start_n, T, S, Lengths, b, prefix, window,
                  CAUSAL: tl.constexpr, BAND: tl.constexpr, HAS_LENGTHS: tl.constexpr, HAS_DOCS: tl.constexpr,
                  HAS_DENSE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """(lo, whole_lo, whole_hi, hi): the query rows the key block at start_n is seen by, [lo, hi), and within
    them the blocks that see all of it, [whole_lo, whole_hi)."""
    k_last = start_n + BLOCK_N - 1
    lo, hi = _query_range(start_n, k_last, T, S, prefix, window, CAUSAL, BAND, BLOCK_M)
    whole_lo, whole_hi = _whole_queries(start_n, k_last, T, S, Lengths, b, prefix, window,
                                        CAUSAL, BAND, HAS_LENGTHS, HAS_DOCS, HAS_DENSE, BLOCK_M)  # fmt: skip
    whole_lo, whole_hi = _within(whole_lo, whole_hi, hi)
    return lo, whole_lo, whole_hi, hi


@triton.jit
def _last_first(BLOCK_M: tl.constexpr):
    """The first query row of this program's block, the last block first: under a causal mask the last rows see
    the most keys, so the longest programs start first and no tail of heavy ones runs alone at the end."""
    return (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M


@triton.jit
def _load(ptr, mask, UPCAST: tl.constexpr):
    """A tile of q, k, v or do (no predicate where mask is None), in float32 when UPCAST (Triton's CPU
    interpreter: its tl.dot misreads bfloat16)."""
    tile = tl.load(ptr) if mask is None else tl.load(ptr, mask=mask, other=0.0)
    return tile.to(tl.float32) if UPCAST else tile


@triton.jit
def _query_rows(bh, start_m, T, S, D, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Query rows start_m .. start_m + BLOCK_M - 1 of head bh: their rows, positions among the keys, and the
    (BLOCK_M, BLOCK_D) tile of the kernel's own (contiguous) out or dq with its in-bounds mask."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    tile = (bh * T + offs_m[:, None]) * D + offs_d[None, :]
    return offs_m, S - T + offs_m, row_ok, tile, row_ok[:, None] & (offs_d[None, :] < D)


@triton.jit
def _rows(rows, stride, BLOCK_D: tl.constexpr):
    """Offsets of the (rows, BLOCK_D) tile at `rows` of one head whose rows are `stride` apart (its last stride 1):
    q, k, v and do are read in the layout they come in, a view of a fused projection too."""
    return rows[:, None].to(tl.int64) * stride + tl.arange(0, BLOCK_D)[None, :]


@triton.jit
def _kv_block(Kh, Vh, k_pos, k_st, v_st, S, D, UPCAST: tl.constexpr, BLOCK_D: tl.constexpr, WHOLE: tl.constexpr,
              EVEN_D: tl.constexpr):  # fmt: skip
    """Keys and values at positions k_pos of one kv head (Kh, Vh: its first key and value, rows k_st and v_st
    apart): two (BLOCK_N, BLOCK_D) tiles, and their mask. WHOLE: every position is inside S, and with EVEN_D
    (d = BLOCK_D) the tiles load with no predicate."""
    ok = (k_pos[:, None] < S) & (tl.arange(0, BLOCK_D)[None, :] < D)
    k_tile, v_tile = Kh + _rows(k_pos, k_st, BLOCK_D), Vh + _rows(k_pos, v_st, BLOCK_D)
    if WHOLE and EVEN_D:
        k, v = _load(k_tile, None, UPCAST), _load(v_tile, None, UPCAST)
    else:
        k, v = _load(k_tile, ok, UPCAST), _load(v_tile, ok, UPCAST)
    return k, v, ok


@triton.jit
def _scores(q, k, q_pos, k_pos, slope, scale, HAS_ALIBI: tl.constexpr, CAP: tl.constexpr,
            PRECISION: tl.constexpr, BASE2: tl.constexpr):  # fmt: skip
    """s = q kᵀ · scale (+ ALiBi), soft-capped to CAP · tanh(s / CAP) where CAP > 0: (BLOCK_M, BLOCK_N) in
    float32, before any mask; with BASE2, times log2 e (exp2 of it is exp of the score, with no multiply of
    its own: log2 e is folded into the scale, or into the cap). With the roles swapped, (k, q, k_pos, q_pos),
    it gives the transpose, k qᵀ (ALiBi's distance is symmetric)."""
    if BASE2 and CAP == 0:
        scale, slope = scale * LOG2E, slope * LOG2E
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
    if HAS_ALIBI:
        s = s - slope * tl.abs(q_pos[:, None] - k_pos[None, :]).to(tl.float32)
    if CAP > 0:  # tanh(x) = 2 sigmoid(2x) - 1
        s = (CAP * LOG2E if BASE2 else CAP) * (2.0 * tl.sigmoid(s * (2.0 / CAP)) - 1.0)
    return s


@triton.jit
def _capped_slope(s, CAP: tl.constexpr, BASE2: tl.constexpr):
    """d capped / d uncapped = 1 - tanh² at the capped scores s (base 2 with BASE2), before any mask."""
    t = s * (1.0 / (CAP * LOG2E) if BASE2 else 1.0 / CAP)
    return 1.0 - t * t


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
    bh, start_m = tl.program_id(1).to(tl.int64), _last_first(BLOCK_M)  # int64: offsets outgrow int32
    b, h = bh // H, bh % H
    j = h // group  # the kv head this query head reads
    Kh, Vh = K + b * k_sb + j * k_sh, V + b * v_sb + j * v_sh  # its keys and values
    offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
    q = _load(Q + b * q_sb + h * q_sh + _rows(offs_m, q_st, BLOCK_D), tile_ok, UPCAST)  # (BLOCK_M, BLOCK_D)
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
    bh, start_m = tl.program_id(1).to(tl.int64), _last_first(BLOCK_M)  # int64: offsets outgrow int32
    b, h = bh // H, bh % H
    j = h // group
    Kh, Vh = K + b * k_sb + j * k_sh, V + b * v_sb + j * v_sh
    offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
    q = _load(Q + b * q_sb + h * q_sh + _rows(offs_m, q_st, BLOCK_D), tile_ok, UPCAST)
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
