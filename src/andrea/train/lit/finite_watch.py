"""Which layer's token mixer gave a non-finite output first, watched on the device: a hook on every mixer
records, for each layer, the first training step at which its output held a NaN or an infinity, with no host
read; the record is read only when the loss has turned non-finite, to name where it began (the earliest step,
and at that step the earliest layer: the layers after it only inherit it)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

NEVER = torch.iinfo(torch.long).max  # a layer's first non-finite step, until it has one


class FiniteWatch:
    def __init__(self, net: nn.Module) -> None:
        mixers = list(getattr(net, "mixers", []))
        self.names = [str(getattr(mixer, "name", "attention")) for mixer in mixers]
        self.step: Tensor | None = None  # () the training step the forwards since the last fold belong to
        self.sums: Tensor | None = None  # (layers,) float32: each layer's output summed, in that step's forward
        self.first: Tensor | None = None  # (layers,) the first step each layer's output was non-finite, or NEVER
        self.handles: list[RemovableHandle] = [
            mixer.register_forward_hook(self._hook(layer)) for layer, mixer in enumerate(mixers)
        ]

    def at(self, step: int, device: torch.device) -> None:
        """The forwards to come belong to training step `step`: the step before is folded in, and the step is a
        tensor filled in place, so that a compiled network reads it without being traced again at every step."""
        if self.first is None or self.step is None or self.sums is None or self.first.device != device:
            self.first = torch.full((len(self.names),), NEVER, dtype=torch.long, device=device)
            self.step = torch.zeros((), dtype=torch.long, device=device)
            self.sums = torch.zeros(len(self.names), dtype=torch.float32, device=device)
        else:
            self._fold()
        self.step.fill_(step)

    def _fold(self) -> None:
        """The step's sums into the record: three ops a step, whatever the depth. Steps only grow: a minimum."""
        if self.first is None or self.step is None or self.sums is None:
            return
        torch.minimum(self.first, torch.where(self.sums.isfinite(), NEVER, self.step), out=self.first)

    def _hook(self, layer: int) -> Any:
        def watch(module: nn.Module, args: Any, output: Any) -> None:
            if not module.training or self.sums is None:
                return
            # The sum of a tensor is non-finite wherever an entry is (NaN or an infinity): one reduction a layer,
            # written in place, instead of an elementwise isfinite and its all(); summed in float32, so that half
            # precision's range (65,504) does not overflow on finite outputs.
            out = output[0].detach()
            torch.sum(out, dim=tuple(range(out.dim())), dtype=torch.float32, out=self.sums[layer])

        return watch

    def describe(self) -> str | None:
        """'layer 1 (gla) gave the first non-finite output, at step 5', or None where none has (one host read)."""
        if self.first is None:
            return None
        self._fold()  # the step now running, whose forward has just been made
        flagged = [(step, layer) for layer, step in enumerate(self.first.tolist()) if step != NEVER]
        if not flagged:
            return None
        step, layer = min(flagged)
        return f"layer {layer} ({self.names[layer]}) gave the first non-finite output, at step {step}"
