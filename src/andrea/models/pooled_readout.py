"""MAD's autoencoder readout (Poli et al. 2024; athms/mad-lab's AutoEncoder with global_pool="last"), for its
compression task: the network is an encoder, its last position's residual the whole row's code, and a small MLP
rebuilds each position from the code and that position's sinusoidal embedding,

    x (B, T, D) -> c = x[:, -1] -> h_t = c + p_t  (p fairseq's sinusoids, as MAD's posemb_sincos_1d)
                -> norm -> Linear -> GELU -> norm -> Linear -> GELU -> (B, T, D)

which the network's final norm and LM head then read (MAD's unembed: a norm and a Linear). The norms are the
network's own (model.net.norm; MAD's are RMSNorms), and the LM head has no bias and is the token embedding
unless `model.net.tie_embeddings=false` (MAD's is a Linear of its own with a bias; experiment=compression unties
it). Every position's logits come from the last token's code, so
the readout has no next token to generate from (andrea.models.gpt refuses a cache).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from andrea.core.hook_points import HookPoint

READOUTS = ("next_token", "pooled_last")  # model.net.readout


def sinusoids(n: int, d: int) -> Tensor:
    """(n, d): sin then cos of position · 10000^(-i / (d/2 - 1)), i < d/2, a zero column for an odd d."""
    half = d // 2
    rates = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000) / max(half - 1, 1)))
    angles = torch.arange(n, dtype=torch.float32).unsqueeze(1) * rates.unsqueeze(0)
    return torch.cat((angles.sin(), angles.cos(), torch.zeros(n, d % 2)), dim=1)


class PooledReadout(nn.Module):
    def __init__(self, d_model: int, max_context: int, norm: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.register_buffer("positions", sinusoids(max_context, d_model), persistent=False)
        self.decoder = nn.Sequential(
            norm(), nn.Linear(d_model, d_model), nn.GELU(), norm(), nn.Linear(d_model, d_model), nn.GELU()
        )
        self.hook_code = HookPoint("hook_code")  # (B, D): the row's code, the encoder's last position

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D), the encoder's residual stream -> (B, T, D), each position rebuilt from the code."""
        code = self.hook_code(x[:, -1])
        positions: Tensor = self.positions  # type: ignore[assignment]
        return self.decoder(code.unsqueeze(1) + positions[: x.shape[1]].to(x.dtype))
