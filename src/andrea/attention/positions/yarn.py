"""YaRN (Peng et al., 2023, "YaRN: Efficient Context Window Extension of Large Language Models"): RoPE's
frequencies for a context `factor` times the one a model was trained on, as gpt-oss and DeepSeek-V3 ship them.

Pair c of a head's r rotated channels turns at θ_c = base^(-2c/r). A pair that turns often within the original
context (more than beta_fast times) keeps θ_c; one that turns less than beta_slow times is slowed to θ_c / factor;
the pairs between blend the two along a linear ramp over c:

    c_low, c_high = r · ln(L / (2π β)) / (2 ln base)      for β = beta_fast, beta_slow; L the original context
    ramp_c = clamp((c - c_low) / (c_high - c_low), 0, 1)  (c_low floored, c_high ceiled with `truncate`)
    θ'_c = θ_c / factor · ramp_c + θ_c · (1 - ramp_c)

and cos and sin are multiplied by the attention factor 0.1 · ln(factor) + 1 (or the one given), which scales every
rotated q · k by its square: the "temperature" that keeps the attention's entropy where training left it.

    position: {kind: rope, base: 150000, yarn: {factor: 32, original_context: 4096, beta_fast: 32, beta_slow: 1,
                                                truncate: false}}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from andrea.utils.rules import BOOLEAN, POSITIVE, Rule, mapping_problem, number, optional

YARN: dict[str, Rule] = {
    "factor": number(1.0, None),
    "original_context": POSITIVE,
    "beta_fast": number(0.0, None, low_open=True),
    "beta_slow": number(0.0, None, low_open=True),
    "truncate": BOOLEAN,
    "attention_factor": optional(number(0.0, None, low_open=True)),
}
DEFAULTS: dict[str, Any] = {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True, "attention_factor": None}


def yarn_problem(yarn: object) -> str | None:
    """What is wrong with position.yarn ("<key>=<value> ..." under it), or None: a mapping of YARN's keys, factor
    and original_context given."""
    needs = ": YaRN needs the factor and the context the model was trained on"
    return mapping_problem(yarn, YARN, ("factor", "original_context"), "YaRN", "{factor: 32, original_context: 4096}",
                           needs)  # fmt: skip


def yarn_frequencies(width: int, base: float, yarn: Mapping[str, Any]) -> tuple[Tensor, float]:
    """The (width/2,) frequencies of `width` rotated channels under YaRN, and the factor cos and sin are scaled by."""
    given = {**DEFAULTS, **yarn}
    factor, context = float(given["factor"]), int(given["original_context"])
    theta = base ** (-torch.arange(0, width, 2, dtype=torch.float32) / width)  # (r/2,)

    def pair_at(turns: float) -> float:  # the pair index that turns `turns` times over the original context
        return width * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_at(given["beta_fast"]), pair_at(given["beta_slow"])
    if given["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, width - 1)
    high = high + 0.001 if low == high else high  # a ramp of one step, not a division by zero
    ramp = ((torch.arange(width // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    inv_freq = theta / factor * ramp + theta * (1 - ramp)
    attention = given["attention_factor"]
    if attention is None:
        attention = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv_freq, float(attention)
