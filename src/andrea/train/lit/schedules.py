"""Learning-rate schedules, built by Hydra as partials that take the optimizer."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def warmup_cosine(optimizer: Optimizer, warmup_steps: int, max_steps: int, min_lr_ratio: float = 0.1) -> LambdaLR:
    """Linear warm-up to the optimizer's lr over `warmup_steps`, then a cosine decay to
    `min_lr_ratio` of it at `max_steps` (nanoGPT's schedule), constant after."""
    if not 0 <= warmup_steps < max_steps:
        raise ValueError(
            f"model.scheduler.warmup_steps={warmup_steps} must be >= 0 and below model.scheduler.max_steps="
            f"{max_steps} (trainer.max_steps in the presets); shorten the warm-up or train for more steps"
        )

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)
