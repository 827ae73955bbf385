"""The triton kernels' masks (andrea.attention.backends.flash_kernels): which key is allowed, which key and query
blocks a tile needs, and which it sees whole (computed with no mask at all)."""

import triton
import triton.language as tl


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
