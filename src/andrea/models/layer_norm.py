"""LayerNorm with the lens's two points inside it, where TransformerLens has them.

    scale      = sqrt(mean((x - mean(x))²) + eps)              hook_scale       (B, T, 1)
    normalized = (x - mean(x)) / scale                          hook_normalized  (B, T, D): before the weight
    out        = normalized · weight + bias                                                 and the bias

With nothing attached to either point it is nn.LayerNorm itself (one fused call, the same parameters and
checkpoint keys); with a hook on either, the three lines above run, so that a hook reads and edits them.
"""

from __future__ import annotations

from torch import Tensor, nn

from andrea.core.hook_points import HookPoint


class LayerNorm(nn.LayerNorm):
    def __init__(self, d_model: int, bias: bool = True, eps: float = 1e-5) -> None:
        super().__init__(d_model, eps=eps, bias=bias)
        self.hook_scale, self.hook_normalized = HookPoint("hook_scale"), HookPoint("hook_normalized")

    def forward(self, x: Tensor) -> Tensor:
        if not (self.hook_scale.fns or self.hook_normalized.fns):
            return super().forward(x)
        centred = x - x.mean(dim=-1, keepdim=True)
        scale = self.hook_scale((centred.pow(2).mean(dim=-1, keepdim=True) + self.eps).sqrt())  # (B, T, 1)
        x = self.hook_normalized(centred / scale)  # (B, T, D)
        if self.weight is not None:
            x = x * self.weight
        return x if self.bias is None else x + self.bias

    def hook_points(self) -> dict[str, HookPoint]:
        return {"hook_scale": self.hook_scale, "hook_normalized": self.hook_normalized}
