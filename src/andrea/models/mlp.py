"""The MLP of a GPT block (model.net.activation), plain or gated:

    plain   proj(act(fc(x)))                  gelu (exact), gelu_tanh (GPT-2's approximation), relu
    gated   proj(act(gate(x)) · fc(x))        swiglu (SiLU: Llama, OLMo, Qwen), geglu (GELU, tanh: Gemma)

fc (and gate) map d_model to the hidden width d_mlp (model.net.d_mlp; mlp_ratio · d_model when null), proj maps
it back into the residual stream. The lens's points are TransformerLens's: hook_pre (the activation's input: the
gate's output in a gated MLP), hook_pre_linear (fc's output, gated only), hook_post (what proj reads).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torch import Tensor, nn
from torch.nn import functional as F

from andrea.core.hook_points import HookPoint

ACTIVATE: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "swiglu": F.silu,
    "geglu": partial(F.gelu, approximate="tanh"),
}  # model.net.activation (andrea.models.settings.ACTIVATIONS) -> the function
GATED = ("swiglu", "geglu")


class MLP(nn.Module):
    def __init__(self, d_model: int, d_mlp: int, dropout: float, bias: bool, activation: str) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, d_mlp, bias=bias)
        self.gate = nn.Linear(d_model, d_mlp, bias=bias) if activation in GATED else None
        self.proj = nn.Linear(d_mlp, d_model, bias=bias)  # writes into the residual stream
        self.dropout = nn.Dropout(dropout)
        self.activate = ACTIVATE[activation]
        self.hook_pre, self.hook_post = HookPoint("hook_pre"), HookPoint("hook_post")
        self.hook_pre_linear = HookPoint("hook_pre_linear")

    def forward(self, x: Tensor) -> Tensor:
        if self.gate is None:
            h = self.hook_post(self.activate(self.hook_pre(self.fc(x))))  # (B, T, d_mlp)
        else:
            h = self.hook_post(self.activate(self.hook_pre(self.gate(x))) * self.hook_pre_linear(self.fc(x)))
        return self.dropout(self.proj(h))  # (B, T, D)

    def hook_points(self) -> dict[str, HookPoint]:
        points = {"hook_pre": self.hook_pre, "hook_post": self.hook_post}
        return points if self.gate is None else points | {"hook_pre_linear": self.hook_pre_linear}
