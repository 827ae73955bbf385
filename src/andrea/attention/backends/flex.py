"""flex: torch FlexAttention, the mask compiled into a block-sparse BlockMask.

The BlockMask is built from the mask's own predicate (its `mask_mod`) and
cached per (mask, shape, device), so a static mask is built once. Flex has no
backward on CPU: the capability says so and training with it there is refused.
Without torch.compile Flex runs an unfused path that materialises scores; by
default it compiles on GPU and stays eager on CPU (compiling costs ~20 s there).

Mechanisms: softmax (and those that only wrap it: gated, qknorm); softcap as a
score_mod (cap · tanh(score / cap)); sink from the log-sum-exp Flex returns:
out · Z / (Z + e^sink) = out · sigmoid(lse - sink).
"""

import warnings
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention

from andrea.attention.contract import AttentionBackend, Capabilities, UnsupportedAttentionError
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism, Sink, Softcap
from andrea.attention.positions import ScoreMod


@lru_cache(maxsize=32)
def _block_mask(
    mask: Mask, batch_size: int | None, num_heads: int | None, q_len: int, kv_len: int, device: str
) -> BlockMask:
    offset = kv_len - q_len  # queries are aligned to the end of the keys

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return mask.predicate(b, h, q_idx + offset, kv_idx)

    return create_block_mask(mask_mod, batch_size, num_heads, q_len, kv_len, device=device)


@lru_cache(maxsize=32)
def _score_fn(
    score_mod: ScoreMod | None, offset: int, cap: float | None = None
) -> Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]:
    # One function object per (modifier, offset, cap): a compiled Flex would recompile for a new one.
    def flex_score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        if score_mod is not None:
            score = score + score_mod.bias(b, h, q_idx + offset, kv_idx)
        return score if cap is None else cap * torch.tanh(score / cap)

    return flex_score_mod


@lru_cache(maxsize=1)
def _compiled_flex() -> Callable[..., Tensor]:
    return torch.compile(flex_attention, dynamic=False)


KERNELS = frozenset({"softmax", "softcap", "sink"})


class FlexBackend(AttentionBackend):
    name = "flex"
    capabilities = Capabilities(
        native_weights=False, cpu_backward=False, native_gqa=True, score_mod=True, kernels=KERNELS
    )

    def __init__(self, compile: bool | None = None) -> None:
        if compile is not None and not isinstance(compile, bool):
            raise ValueError(f"attention.options.compile={compile!r} must be true, false or null (GPU only)")
        self.compile = compile  # None: compile on GPU, eager on CPU

    MIN_COMPILED_HEAD_DIM = 16  # the compiled kernel's tiles (torch 2.5 - 2.13)

    def check(
        self,
        *,
        mask: Mask | None,
        device: torch.device | str | None,
        needs_grad: bool,
        score_mod: ScoreMod | None = None,
        head_dim: int | None = None,
    ) -> None:
        super().check(mask=mask, device=device, needs_grad=needs_grad, score_mod=score_mod, head_dim=head_dim)
        compiled = self.compile is not False and device is not None and torch.device(device).type == "cuda"
        if compiled and head_dim is not None and head_dim < self.MIN_COMPILED_HEAD_DIM:
            raise UnsupportedAttentionError(
                f"attention backend 'flex' compiled on GPU needs head_dim >= {self.MIN_COMPILED_HEAD_DIM}, got "
                f"{head_dim}; widen the model, use fewer heads, or build it with compile=False "
                "(attention.options.compile=false)"
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
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, _ = q.shape
        S = k.shape[2]
        block_mask = None
        if mask is not None and not mask.is_full:
            batch = B if mask.batch_dependent else None  # None: one BlockMask broadcast over the batch
            heads = H if mask.head_dependent else None
            block_mask = _block_mask(mask, batch, heads, T, S, str(q.device))
        cap = mechanism.cap if isinstance(mechanism, Softcap) else None
        scores = None if score_mod is None and cap is None else _score_fn(score_mod, S - T, cap)
        options: dict[str, Any] = dict(block_mask=block_mask, score_mod=scores, scale=scale, enable_gqa=k.shape[1] != H)
        if not isinstance(mechanism, Sink):
            return self._flex(q.device.type)(q, k, v, **options), None  # (B, H, T, d)
        out, aux = self._flex(q.device.type)(q, k, v, return_aux=AuxRequest(lse=True), **options)
        sink = mechanism.sink.view(1, H, 1).to(aux.lse.dtype)  # the sink's share of each row's mass: no value
        return out * torch.sigmoid(aux.lse - sink).unsqueeze(-1).to(out.dtype), None

    def _flex(self, device_type: str) -> Callable[..., Any]:
        """Flex compiled, or run unfused (compile=False, or on CPU by default) without its warning."""
        compiled = device_type != "cpu" if self.compile is None else self.compile
        if compiled:
            return _compiled_flex()

        def unfused(*args: Any, **kwargs: Any) -> Any:
            with warnings.catch_warnings():  # running unfused was chosen (compile=False or CPU default)
                warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
                return flex_attention(*args, **kwargs)

        return unfused
