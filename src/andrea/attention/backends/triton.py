"""triton: andrea's own FlashAttention-2 kernel (flash_kernels.py), forward and backward.

One launch computes every (batch, head): the kernels' grid is (query block, B x H), the long dimension on the
first axis, which takes 2^31 - 1 programs where the others take 65,535 (`launch_grid`). The mask
never becomes a matrix when its parameters (`Mask.params()`, andrea.attention.masks.params) say
it all: causal, sliding window, prefix-LM and none, alone, wrapped in a module's precomputed
buffer, or joined with `&` to each other, key padding and packed documents, reach the kernel as
a few numbers and two small tensors (lengths (B,), document ids (B, S)), and key blocks they
rule out are skipped. Any other mask (an `|` combination, a plugin's without params) reaches it
as its dense (B|1, H|1, T, S) form, read a tile at a time. ALiBi is a score bias computed in the kernel from
the per-head slopes; grouped heads read their shared k and v in place. Mechanisms: softmax, and softcap
(cap · tanh(s / cap) on the scores, the cap compiled in), and sink (each row's output scaled by
Z / (Z + exp(sink)) from the kernel's log-sum-exp Z, its gradient through lse), and sigmoid (each
weight sigmoid(s + bias) on its own, the bias compiled in). The kernels are torch operators
(`andrea::triton_attention` and its backward, with shape-only fake versions and autograd registered), so
torch.compile traces a model through attention as one node each, with no graph break.

Runs on CUDA GPUs. CPU tensors run the same kernels under Triton's interpreter while
TRITON_INTERPRET=1 is set (read at each call), slowly: that is how its tests run. Without Triton installed it stays
registered, its capabilities say why it cannot run, and every call is refused with the install
command.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.attention.advice import _alternatives
from andrea.attention.backends.loading import INTERPRETER, _language_interpreted, interpreter_on
from andrea.attention.backends.triton_ops import _mask_inputs, attention_op
from andrea.attention.backends.triton_tiles import FLOAT32_MAX_HEAD_DIM
from andrea.attention.contract import AttentionBackend, Capabilities, UnsupportedAttentionError
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism, Sigmoid, Sink, Softcap
from andrea.attention.positions import ALiBi, ScoreMod

INSTALL = "pip install 'andrea[triton]' (from a clone: pip install -e '.[triton]')"
MAX_HEAD_DIM = 256
# the mechanisms' kernels it runs (andrea.attention.mechanisms): softcap and sigmoid in the kernels, sink after them
KERNELS = frozenset({"softmax", "softcap", "sink", "sigmoid"})

try:
    import triton  # noqa: F401  # an optional extra
except ImportError:
    TRITON_INSTALLED = False
else:
    TRITON_INSTALLED = True


def _kernel_of(mechanism: Mechanism | None) -> tuple[str, float]:
    """(the kernels' math, its number) for a mechanism: softcap and its cap, sigmoid and its bias, or softmax
    (a sink's too: its output is scaled after, from the log-sum-exp)."""
    if isinstance(mechanism, Softcap):
        return "softcap", mechanism.cap
    if isinstance(mechanism, Sigmoid):
        return "sigmoid", mechanism.bias
    return "softmax", 0.0


class _Capabilities:
    """Triton's capabilities as they stand when read: CPU tensors run only while the interpreter is on."""

    def __get__(self, backend: object, owner: type) -> Capabilities:
        interpreted = interpreter_on()
        return Capabilities(
            native_weights=False,  # never forms the (T, S) weights: the contract's probe computes them
            cpu_backward=interpreted,
            native_gqa=True,
            score_mod=True,  # ALiBi, in the kernel
            kernels=KERNELS,
            cpu=interpreted,
            unavailable=None if TRITON_INSTALLED else f"Triton is not installed; {INSTALL}",
        )


def _check_interpreter() -> None:
    """On a CPU, the kernels run only under Triton's interpreter, switched on before Triton was imported."""
    if not interpreter_on():
        raise UnsupportedAttentionError(
            "attention backend 'triton' runs on CUDA GPUs (on CPU only under Triton's interpreter, "
            f"{INTERPRETER}=1, slowly: for tests); use {_alternatives(lambda c: c.cpu)}, or a GPU"
        )
    if not _language_interpreted():
        raise UnsupportedAttentionError(
            f"attention backend 'triton': {INTERPRETER}=1 was set after Triton was imported; set it before "
            "the process starts (Triton reads it once, at import)"
        )


class TritonBackend(AttentionBackend):
    name = "triton"
    capabilities = _Capabilities()  # a descriptor: read at each access, not fixed at import

    def check(
        self,
        *,
        mask: Mask | None,
        device: torch.device | str | None,
        needs_grad: bool,
        score_mod: ScoreMod | None = None,
        head_dim: int | None = None,
    ) -> None:
        if device is not None and torch.device(device).type == "cpu" and TRITON_INSTALLED:
            _check_interpreter()
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
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        if q.dtype == torch.float32 and q.device.type == "cuda" and q.shape[-1] > FLOAT32_MAX_HEAD_DIM:
            raise UnsupportedAttentionError(
                f"attention backend 'triton' takes float32 up to head_dim {FLOAT32_MAX_HEAD_DIM} on a GPU, got "
                f"{q.shape[-1]} (its tiles would not fit in shared memory); use bfloat16 "
                "(trainer.precision=bf16-mixed), or attention=sdpa"
            )
        tensors, ints, flags = _mask_inputs(q, k, mask, score_mod)
        kernel, value = _kernel_of(mechanism)
        out, lse = attention_op(q, k, v, tensors, ints, flags, scale, kernel, value)  # (B, H, T, d), (B, H, T)
        if not isinstance(mechanism, Sink):
            return out, None
        # a sink: exp(sink) joins each row's sum Z = exp(lse), so out shrinks by Z / (Z + exp(sink))
        sink = mechanism.sink.view(1, -1, 1).to(lse.dtype)
        return out * torch.sigmoid(lse - sink).unsqueeze(-1).to(out.dtype), None
