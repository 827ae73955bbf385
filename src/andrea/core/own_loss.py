"""A part's loss of its own: a module that learns from something other than the task (DSA's lightning indexer,
trained to match the attention it prunes) keeps the loss of its last forward pass in training as `own_loss` (a
scalar, or None), and the training step adds every part's to the task's loss. A part that learns alone for a
while (DSA's dense warm-up) says so with `freezes_the_rest`: every other weight of the network is frozen then.

    learners(net)        the parts that keep a loss of their own, found once (a training step reads them each time)
    own_losses(parts)    the losses they keep from the last forward pass, [] where none learnt on its own
    freeze_the_rest(net) the names of the weights frozen, [] where no part asks it
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor, nn


def learners(net: nn.Module) -> list[nn.Module]:
    return [module for module in net.modules() if hasattr(module, "own_loss")]


def own_losses(parts: Iterable[nn.Module]) -> list[Tensor]:
    return [loss for part in parts if (loss := getattr(part, "own_loss", None)) is not None]


def freeze_the_rest(net: nn.Module) -> list[str]:
    """Freeze every parameter outside the parts that ask it (requires_grad False); the names frozen."""
    learners = [name for name, module in net.named_modules() if getattr(module, "freezes_the_rest", False) is True]
    if not learners:
        return []
    frozen = [name for name, _ in net.named_parameters() if not any(name.startswith(f"{part}.") for part in learners)]
    for name, parameter in net.named_parameters():
        if name in frozen:
            parameter.requires_grad_(False)
    return frozen
