"""The norms a network's layers use (model.net.norm), each with the lens's two points where TransformerLens has
them (andrea.models.layer_norm's LayerNorm is the first):

    layernorm       (x - mean(x)) / sqrt(var(x) + eps) · w + b         GPT-2, ANDREA (the default)
    rmsnorm         x / sqrt(mean(x²) + eps) · w                        Llama, OLMo, Qwen
    gemma_rmsnorm   x / sqrt(mean(x²) + eps) · (1 + w), w from 0        Gemma
    none            x                                                   no norm at all

RMSNorm computes in float32 whatever its input's dtype, as the Hugging Face models do, and returns the input's.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from andrea.core.hook_points import HookPoint
from andrea.models.layer_norm import LayerNorm


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) times the gain `weight` (1 + weight for Gemma's, whose gain starts at 0)."""

    def __init__(self, d_model: int, eps: float = 1e-6, offset: bool = False) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.zeros(d_model) if offset else torch.ones(d_model))
        self.hook_scale, self.hook_normalized = HookPoint("hook_scale"), HookPoint("hook_normalized")

    def forward(self, x: Tensor) -> Tensor:
        dtype, x = x.dtype, x.float()
        scale = self.hook_scale((x.pow(2).mean(dim=-1, keepdim=True) + self.eps).sqrt())  # (B, T, 1)
        normalized = self.hook_normalized(x / scale)  # (B, T, D)
        gain = 1.0 + self.weight.float() if self.offset else self.weight.float()
        return (normalized * gain).to(dtype)

    def hook_points(self) -> dict[str, HookPoint]:
        return {"hook_scale": self.hook_scale, "hook_normalized": self.hook_normalized}

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps:g}" + (", gain 1 + w" if self.offset else "")


class NoNorm(nn.Identity):
    """model.net.norm=none: the input as it is, with no points."""

    def hook_points(self) -> dict[str, HookPoint]:
        return {}


def make_norm(kind: str, d_model: int, eps: float, bias: bool) -> nn.Module:
    """The norm model.net.norm names, over d_model channels."""
    if kind == "layernorm":
        return LayerNorm(d_model, bias=bias, eps=eps)
    if kind == "none":
        return NoNorm()
    return RMSNorm(d_model, eps, offset=kind == "gemma_rmsnorm")
