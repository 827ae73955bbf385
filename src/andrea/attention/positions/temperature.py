"""Attention temperature for layers without positions (Llama 4's NoPE layers; Nakanishi, 2025, "Scalable-Softmax Is
Superior for Attention"): a query at position i is scaled by a factor that grows with log i, so that its attention
stays as sharp over a long context as over a short one.

    q_i' = q_i · (scale · ln(1 + floor((i + 1) / floor)) + 1)        i counted from 0, from the sequence's start

Llama 4: scale 0.1, floor 8192 (queries in the first 8,191 positions are left alone). Applied after the projection
(and QK-norm), before the scores; keys and values are left alone.

    position: {kind: none, temperature: {scale: 0.1, floor: 8192}}
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from andrea.utils.rules import POSITIVE, Rule, mapping_problem, number

TEMPERATURE: dict[str, Rule] = {"scale": number(0.0, None, low_open=True), "floor": POSITIVE}


class QueryTemperature(nn.Module):
    def __init__(self, scale: float, floor: int) -> None:
        super().__init__()
        self.scale, self.floor = scale, floor

    def forward(self, q: Tensor, start: int = 0) -> Tensor:
        """q (B, H, T, d) at positions start .. start + T - 1 -> the scaled q."""
        positions = torch.arange(start, start + q.shape[2], device=q.device, dtype=torch.float32)
        factor = torch.log1p(torch.floor((positions + 1.0) / self.floor)) * self.scale + 1.0  # (T,)
        return q * factor.to(q.dtype).view(-1, 1)

    def extra_repr(self) -> str:
        return f"scale={self.scale:g}, floor={self.floor}"


def temperature_problem(temperature: object) -> str | None:
    """What is wrong with position.temperature ("<key>=<value> ..." under it), or None."""
    example, needs = "{scale: 0.1, floor: 8192}", f"; give {', '.join(TEMPERATURE)}"
    return mapping_problem(temperature, TEMPERATURE, tuple(TEMPERATURE), "the temperature", example, needs)
