"""triton's kernels as torch operators: `andrea::triton_attention` and its backward, with shape-only fake versions
and autograd registered (torch.compile traces a model through attention as one node each), the inputs a mask and
a score bias become for them, and their launch grid. The kernels themselves: andrea.attention.backends.flash_kernels,
compiled for a GPU or run under Triton's interpreter for CPU tensors (andrea.attention.backends.loading)."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

from andrea.attention.backends.loading import kernels
from andrea.attention.backends.triton_tiles import _block_d, _tiles_for
from andrea.attention.contract import UnsupportedAttentionError
from andrea.attention.masks import Mask, MaskParams
from andrea.attention.positions import ALiBi, ScoreMod
from andrea.attention.positions.alibi import alibi_slopes


@functools.cache
def _slopes(n_head: int, device: torch.device) -> Tensor:
    """ALiBi's per-head slopes on the device, made once: no host-to-device copy per call."""
    return torch.tensor(alibi_slopes(n_head), device=device, dtype=torch.float32)


FLAGS = ("CAUSAL", "BAND", "HAS_ALIBI", "HAS_LENGTHS", "HAS_DOCS", "HAS_DENSE")  # the kernels' mask switches


def _params_or_dense(q: Tensor, k: Tensor, mask: Mask | None) -> tuple[MaskParams, Tensor | None]:
    """The mask's parameters, or, for a mask they cannot say, its dense form (int8, (B|1, H|1, T, S)) that the
    kernel reads a tile at a time."""
    params = MaskParams() if mask is None else mask.params()
    if params is not None:
        return params, None
    assert mask is not None
    B, H, T, _ = q.shape
    dense = mask.dense(T, k.shape[2], batch_size=B, num_heads=H, device=q.device).to(torch.int8).contiguous()
    return MaskParams(), dense


def _mask_inputs(
    q: Tensor, k: Tensor, mask: Mask | None, score_mod: ScoreMod | None
) -> tuple[list[Tensor], list[int], list[bool]]:
    """What the mask and the score bias become for the kernels, as an op takes them: (tensors: ALiBi's slopes,
    the lengths, the document ids, the dense form; integers: the dense form's strides, the prefix, the window;
    the FLAGS)."""
    S = k.shape[2]
    params, dense = _params_or_dense(q, k, mask)
    empty_i = torch.empty(1, dtype=torch.int64, device=q.device)
    lengths = empty_i if params.lengths is None else params.lengths.to(q.device, torch.int64).contiguous()
    docs = empty_i if params.document_ids is None else params.document_ids.to(q.device, torch.int64).contiguous()
    slopes = _slopes(score_mod.n_head, q.device) if isinstance(score_mod, ALiBi) else empty_i.float()
    dense_strides = [0, 0, 0] if dense is None else [dense.stride(i) if dense.shape[i] > 1 else 0 for i in range(3)]
    tensors = [slopes, lengths, docs, empty_i.to(torch.int8) if dense is None else dense]
    # clamped to the context (a window past S keys is no window, a prefix past them the whole): the kernels
    # add them to positions in int32, where a window of 2^31 - 1 would wrap
    window = S + 1 if params.window is None else min(params.window, S + 1)
    ints = [*dense_strides, min(params.prefix, S), window]
    flags = [params.causal, params.band, score_mod is not None, params.lengths is not None,
             params.document_ids is not None, dense is not None]  # fmt: skip
    return tensors, ints, flags


def _rows_apart(x: Tensor) -> Tensor:
    """x as the kernels read it: any layout whose last stride is 1 (a view of a fused projection, in place)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def _strides(x: Tensor) -> list[int]:
    """A (B, H, T, d) tensor's strides over batch, head and row, as the kernels take them."""
    return list(x.stride()[:3])


def _kernel_args(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tensors: list[Tensor],
    ints: list[int],
    flags: list[bool],
    scale: float,
    kernel: str,
    value: float,
) -> tuple[list[object], dict[str, Any]]:
    """The kernels' shared arguments after their own tensors: (positional, constexpr keywords); each launch
    adds its own kernel's tiles (`_block_sizes`)."""
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    *dense_strides, prefix, window = ints
    positional = [*tensors, *dense_strides, *_strides(q), *_strides(k), *_strides(v), scale, H, H // H_kv, T, S, d,
                  prefix, window]  # fmt: skip
    constexprs = dict(
        zip(FLAGS, flags, strict=True),
        CAP=value if kernel == "softcap" else 0.0,  # cap · tanh(s / cap) on the scores, compiled per cap (0: none)
        SIGMOID=kernel == "sigmoid",  # sigmoid(s + bias) for each weight on its own, compiled per bias
        BIAS=value if kernel == "sigmoid" else 0.0,
        PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32",  # float32: three tf32 products, ~fp32 exact
        UPCAST=q.device.type == "cpu" and q.dtype != torch.float32,  # the interpreter's dot misreads bfloat16
        EVEN_D=d == _block_d(d),  # no column past d: whole blocks load with no predicate
    )
    return positional, constexprs


# The kernels as torch operators (andrea::triton_attention and its backward): torch.compile traces a model
# through them as single nodes, with no graph break, from their fake (shape-only) versions below.
@torch.library.custom_op("andrea::triton_attention", mutates_args=())
def attention_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tensors: list[Tensor],
    ints: list[int],
    flags: list[bool],
    scale: float,
    kernel: str,
    value: float,
) -> tuple[Tensor, Tensor]:
    """(out (B, H, T, d), lse (B, H, T)) = softmax(mask(q kᵀ · scale + bias)) v and each row's log-sum-exp;
    kernel "softcap": the scores capped to value · tanh(s / value) first; "sigmoid": out = sigmoid(s + value) v
    over the allowed keys (lse then unused)."""
    q, k, v = _rows_apart(q), _rows_apart(k), _rows_apart(v)  # read in place: no copy of a transposed view
    B, H, T, _ = q.shape
    args, constexprs = _kernel_args(q, k, v, tensors, ints, flags, scale, kernel, value)
    out = q.new_empty(q.shape)  # contiguous
    lse = torch.empty(B, H, T, device=q.device, dtype=torch.float32)  # log-sum-exp of each row's scores
    tiles = _tiles_for(q, kernel)["forward"]
    grid = launch_grid(T, tiles["BLOCK_M"], B * H)
    kernels(q.device.type == "cpu").attention_forward[grid](q, k, v, out, lse, *args, **constexprs, **tiles)
    return out, lse


@attention_op.register_fake
def _(q: Tensor, *args: object) -> tuple[Tensor, Tensor]:
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)  # contiguous, as the real ones


@torch.library.custom_op("andrea::triton_attention_backward", mutates_args=())
def attention_backward_op(
    d_out: Tensor, d_lse: Tensor | None, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
    tensors: list[Tensor], ints: list[int], flags: list[bool], scale: float, kernel: str, value: float,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dq, dk, dv); the weights recomputed from lse. d_lse: the gradient that reached lse (a sink's scaling
    reads it), or None: lse's gradient is p, so it joins dp - δ as -d_lse."""
    d_out, q, k, v = _rows_apart(d_out), _rows_apart(q), _rows_apart(k), _rows_apart(v)
    out = out.contiguous()  # the forward's own (a no-op)
    B, H, T, _ = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    args, constexprs = _kernel_args(q, k, v, tensors, ints, flags, scale, kernel, value)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)  # contiguous
    flash, tiles = kernels(q.device.type == "cpu"), _tiles_for(q, kernel)
    delta = torch.empty(B, H, T, device=q.device, dtype=torch.float32)  # rowsum(do ⊙ out) - d_lse
    do_strides = _strides(d_out)
    d_lse = lse if d_lse is None else d_lse.float().contiguous()  # without one, lse stands in, unread
    grid_delta = launch_grid(T, tiles["delta"]["BLOCK_M"], B * H)  # δ's pre-pass, then dq: a program per query block
    flash.attention_backward_delta[grid_delta](
        out, d_out, *do_strides, d_lse, delta, H, T, q.shape[-1], HAS_DLSE=d_lse is not lse, **tiles["delta"]
    )
    grid_q = launch_grid(T, tiles["dq"]["BLOCK_M"], B * H)
    flash.attention_backward_dq[grid_q](q, k, v, d_out, dq, lse, delta, *do_strides, *args, **constexprs, **tiles["dq"])
    grid_kv = launch_grid(S, tiles["dkdv"]["BLOCK_N"], B * H_kv)  # dk/dv: a program per key block
    flash.attention_backward_dkdv[grid_kv](
        q, k, v, d_out, dk, dv, lse, delta, *do_strides, *args, **constexprs, **tiles["dkdv"]
    )
    return dq, dk, dv


@attention_backward_op.register_fake
def _(
    d_out: Tensor, d_lse: Tensor | None, q: Tensor, k: Tensor, v: Tensor, *args: object
) -> tuple[Tensor, Tensor, Tensor]:
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)  # contiguous, as the real ones


def _save_for_backward(ctx: Any, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
    q, k, v, tensors, ints, flags, scale, kernel, value = inputs
    ctx.save_for_backward(q, k, v, *output, *tensors)
    ctx.ints, ctx.flags, ctx.scale, ctx.kernel, ctx.value = ints, flags, scale, kernel, value


def _backward(ctx: Any, d_out: Tensor, d_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    q, k, v, out, lse, *tensors = ctx.saved_tensors
    grads = attention_backward_op(
        d_out, d_lse, q, k, v, out, lse, tensors, ctx.ints, ctx.flags, ctx.scale, ctx.kernel, ctx.value
    )
    return *grads, [None] * len(tensors), *(None,) * 5  # the inputs' structure: no gradient past q, k, v


attention_op.register_autograd(_backward, setup_context=_save_for_backward)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


GRID_LIMITS = (2**31 - 1, 65_535)  # CUDA's most programs on a grid's first axis, and on its second


def launch_grid(rows: int, block: int, heads: int) -> tuple[int, int]:
    """A kernel's grid: (blocks of `block` of its `rows` queries or keys, `heads` = batch x heads). The blocks
    grow with the length (1M keys at head_dim 256 are 65,536 blocks of dk/dv's 16), so they take the first axis;
    beyond what the second axis takes, the call is refused in one line."""
    grid = (max(1, _cdiv(rows, block)), heads)
    if grid[1] > GRID_LIMITS[1] or grid[0] > GRID_LIMITS[0]:
        raise UnsupportedAttentionError(
            f"attention backend 'triton' launches one program per block and (sequence, head): {rows} rows in blocks "
            f"of {block} for {heads} sequence-heads pass a GPU's grid {GRID_LIMITS}; use a smaller batch, or "
            "attention=sdpa"
        )
    return grid
