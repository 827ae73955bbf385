"""The triton kernels' loads and scores (andrea.attention.backends.flash_kernels): rows of q, k, v and do in any
layout, a block of keys and values, the scores in base 2 with ALiBi and the soft cap."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e): scores are kept in base-2 units
LN2 = tl.constexpr(0.6931471805599453)


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
def _query_block(Q, K, V, q_sb, q_sh, q_st, k_sb, k_sh, v_sb, v_sh, H, group, T, S, D, UPCAST: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    """This program's block of queries, as the forward and dq read it: its head bh (sequence b, head h), its first
    row, the keys and values of the kv head h reads, its rows (_query_rows) and its (BLOCK_M, BLOCK_D) tile of q."""
    bh, start_m = tl.program_id(1).to(tl.int64), _last_first(BLOCK_M)  # int64: offsets outgrow int32
    b, h = bh // H, bh % H
    j = h // group  # the kv head this query head reads
    Kh, Vh = K + b * k_sb + j * k_sh, V + b * v_sb + j * v_sh
    offs_m, q_pos, row_ok, tile, tile_ok = _query_rows(bh, start_m, T, S, D, BLOCK_M, BLOCK_D)
    q = _load(Q + b * q_sb + h * q_sh + _rows(offs_m, q_st, BLOCK_D), tile_ok, UPCAST)
    return bh, b, h, start_m, Kh, Vh, offs_m, q_pos, row_ok, tile, tile_ok, q


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
