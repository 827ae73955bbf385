"""triton: andrea's own FlashAttention-2 kernel (flash_kernels.py), forward and backward.

One launch computes every (batch, head): the kernels' grid is (B x H, query block). The mask
never becomes a matrix when its parameters say it all: causal, sliding window, prefix-LM and
none, each alone or joined with `&` to key padding and packed documents, reach the kernel as a
few numbers and two small tensors (lengths (B,), document ids (B, S)), and key blocks they rule
out are skipped. Any other mask (an `|` combination, a plugin's) reaches it as its dense
(B|1, H|1, T, S) form, read a tile at a time. ALiBi is a score bias computed in the kernel from
the per-head slopes; grouped heads read their shared k and v in place.

Runs on CUDA GPUs. On CPU it runs only under Triton's interpreter (TRITON_INTERPRET=1, set
before andrea is imported), slowly: that is how its tests run. Without Triton installed it stays
registered, its capabilities say why it cannot run, and every call is refused with the install
command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from andrea.attention.contract import AttentionBackend, Capabilities, UnsupportedAttentionError, _alternatives
from andrea.attention.masks import Mask
from andrea.attention.masks.causal import Causal
from andrea.attention.masks.combine import Combined
from andrea.attention.masks.document import Document
from andrea.attention.masks.none import NoMask
from andrea.attention.masks.padding import KeyPadding
from andrea.attention.masks.prefix_lm import PrefixLM
from andrea.attention.masks.sliding_window import SlidingWindow
from andrea.attention.positions import ALiBi, ScoreMod
from andrea.attention.positions.alibi import alibi_slopes

try:
    from andrea.attention.backends import flash_kernels
except ImportError:  # Triton is an optional extra
    flash_kernels = None  # type: ignore[assignment]

INSTALL = "pip install 'andrea[triton]' (from a clone: pip install -e '.[triton]')"
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # Triton reads it when the kernels are defined
MAX_HEAD_DIM = 256


@dataclass
class KernelMask:
    """A mask as the kernel reads it (flash_kernels._allowed): numbers, and small tensors or None."""

    causal: bool = False  # key <= query, except keys below `prefix`
    prefix: int = 0
    window: int | None = None  # query - key < window (None: unbounded)
    band: bool = False  # and key - query < window
    lengths: Tensor | None = None  # (B,) key padding
    document_ids: Tensor | None = None  # (B, S) packed documents


def kernel_mask(mask: Mask | None) -> KernelMask | None:
    """The mask as parameters, or None when they cannot say it (then the kernel reads its dense form).

    Understood: none, causal, sliding_window, prefix_lm, padding and document, alone or joined
    with `&`, with at most one of the first four."""
    parts = mask.masks if isinstance(mask, Combined) and mask.op == "&" else [mask]
    out, positional = KernelMask(), 0
    for part in parts:
        if isinstance(part, (NoMask, type(None))):
            continue
        if isinstance(part, KeyPadding):
            out.lengths = part.lengths
        elif isinstance(part, Document):
            out.document_ids = part.document_ids
        elif isinstance(part, Causal):
            out.causal, positional = True, positional + 1
        elif isinstance(part, PrefixLM):
            out.causal, out.prefix, positional = True, part.prefix_len, positional + 1
        elif isinstance(part, SlidingWindow):
            out.causal, out.window, out.band = part.causal, part.window, not part.causal
            positional += 1
        else:
            return None
    return out if positional <= 1 else None


def _block_sizes(head_dim: int, device: torch.device) -> dict[str, int]:
    block_d = max(16, _next_power_of_2(head_dim))
    if device.type == "cpu":  # the interpreter: small tiles keep the tests quick
        return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_D=block_d)
    return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_D=block_d, num_warps=4 if block_d <= 64 else 8, num_stages=2)


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _launch_args(
    q: Tensor, k: Tensor, mask: Mask | None, score_mod: ScoreMod | None, scale: float
) -> tuple[list[object], dict[str, Any]]:
    """The kernels' shared arguments after their tensors: (positional, constexpr keywords)."""
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    params, dense = kernel_mask(mask), None
    if params is None:  # a mask its parameters cannot say: the kernel reads its dense form, a tile at a time
        assert mask is not None  # kernel_mask(None) is the empty KernelMask
        dense = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device).to(torch.int8).contiguous()
        params = KernelMask()
    empty_i = torch.empty(1, dtype=torch.int64, device=q.device)
    lengths = empty_i if params.lengths is None else params.lengths.to(q.device, torch.int64).contiguous()
    docs = empty_i if params.document_ids is None else params.document_ids.to(q.device, torch.int64).contiguous()
    slopes = torch.empty(1, device=q.device)
    if isinstance(score_mod, ALiBi):
        slopes = torch.tensor(alibi_slopes(score_mod.n_head), device=q.device, dtype=torch.float32)
    dense_strides = (
        (0, 0, 0) if dense is None else tuple(dense.stride(i) if dense.shape[i] > 1 else 0 for i in range(3))
    )
    positional = [
        slopes, lengths, docs, empty_i.to(torch.int8) if dense is None else dense, *dense_strides,
        scale, H, H // H_kv, T, S, d, params.prefix, S + 1 if params.window is None else params.window,
    ]  # fmt: skip
    constexprs = dict(
        CAUSAL=params.causal,
        BAND=params.band,
        HAS_ALIBI=score_mod is not None,
        HAS_LENGTHS=params.lengths is not None,
        HAS_DOCS=params.document_ids is not None,
        HAS_DENSE=dense is not None,
        PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32",  # float32: three tf32 products, ~fp32 exact
        UPCAST=q.device.type == "cpu" and q.dtype != torch.float32,  # the interpreter's dot misreads bfloat16
        **_block_sizes(d, q.device),
    )
    return positional, constexprs


class _FlashAttention(torch.autograd.Function):
    """out = softmax(mask(q kᵀ · scale + bias)) v, by flash_kernels; the backward recomputes the weights."""

    @staticmethod
    def forward(ctx, q, k, v, mask, score_mod, scale):  # type: ignore[no-untyped-def]
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, H, T, _ = q.shape
        args, constexprs = _launch_args(q, k, mask, score_mod, scale)
        out = torch.empty_like(q)  # (B, H, T, d)
        lse = torch.empty(B, H, T, device=q.device, dtype=torch.float32)  # log-sum-exp of each row's scores
        grid = (B * H, _cdiv(T, constexprs["BLOCK_M"]))
        flash_kernels.attention_forward[grid](q, k, v, out, lse, *args, **constexprs)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.launch = (args, constexprs)
        return out

    @staticmethod
    def backward(ctx, d_out):  # type: ignore[no-untyped-def]
        q, k, v, out, lse = ctx.saved_tensors
        args, constexprs = ctx.launch
        B, H, T, _ = q.shape
        H_kv, S = k.shape[1], k.shape[2]
        d_out = d_out.contiguous()
        delta = (d_out.float() * out.float()).sum(-1)  # (B, H, T): rowsum(do ⊙ out)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        grid_q = (B * H, _cdiv(T, constexprs["BLOCK_M"]))
        flash_kernels.attention_backward_dq[grid_q](q, k, v, d_out, dq, lse, delta, *args, **constexprs)
        grid_kv = (B * H_kv, _cdiv(S, constexprs["BLOCK_N"]))
        flash_kernels.attention_backward_dkdv[grid_kv](q, k, v, d_out, dk, dv, lse, delta, *args, **constexprs)
        return dq, dk, dv, None, None, None


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class TritonBackend(AttentionBackend):
    name = "triton"
    capabilities = Capabilities(
        native_weights=False,  # never forms the (T, S) weights: the contract's probe computes them
        cpu_backward=INTERPRETED,
        native_gqa=True,
        score_mod=True,  # ALiBi, in the kernel
        cpu=INTERPRETED,
        unavailable=None if flash_kernels is not None else f"Triton is not installed; {INSTALL}",
    )

    def check(
        self,
        *,
        mask: Mask | None,
        device: torch.device | str,
        needs_grad: bool,
        score_mod: ScoreMod | None = None,
        head_dim: int | None = None,
    ) -> None:
        if torch.device(device).type == "cpu" and not INTERPRETED and flash_kernels is not None:
            raise UnsupportedAttentionError(
                "attention backend 'triton' runs on CUDA GPUs (on CPU only under Triton's interpreter, "
                f"TRITON_INTERPRET=1, slowly: for tests); use {_alternatives(lambda c: c.cpu)}, or a GPU"
            )
        super().check(mask=mask, device=device, needs_grad=needs_grad, score_mod=score_mod, head_dim=head_dim)
        if score_mod is not None and not isinstance(score_mod, ALiBi):
            raise UnsupportedAttentionError(
                f"attention backend 'triton' adds ALiBi in its kernel, not {score_mod.kind}; use attention=sdpa or flex"
            )
        if head_dim is not None and head_dim > MAX_HEAD_DIM:
            raise UnsupportedAttentionError(
                f"attention backend 'triton' takes head_dim <= {MAX_HEAD_DIM}, got {head_dim}; use more heads"
            )

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        return _FlashAttention.apply(q, k, v, mask, score_mod, scale), None  # (B, H, T, d)
