"""A layer kind of several token mixers side by side (Falcon-H1's attention beside Mamba-2; Hymba's heads): each part
reads the same normed input and their outputs are summed,

    y = mixer_1(x) + mixer_2(x) + ...            x (B, T, D) the block's input after its first norm

    kinds:
      hybrid:
        parallel:
          attention: {mixer: attention, heads: {n_kv_head: 2}}     each part a kind, as model.net.kinds writes one
          ssm: {mixer: mamba2, n_head: 4, norm: false}

The parts stay two to whatever reads the layer: their hook points under the part's name
(`blocks.<layer>.attn.attention.hook_pattern`, `blocks.<layer>.attn.ssm.hook_state`), their caches side by side,
and their weights for the maps side by side along the heads (the first part's heads, then the next's), the map's
subtitle saying which heads are which.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from andrea.core.cache_size import CacheSize
from andrea.core.hook_points import HookPoint, prefixed

PARALLEL = "parallel"  # the kind key (and the spec's mixer name) of a layer of parts


class ParallelCache:
    """Each part's cache, by the part's name."""

    def __init__(self, parts: dict[str, object]) -> None:
        self.parts = parts

    @property
    def next_position(self) -> int:
        return next(iter(self.parts.values())).next_position  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"ParallelCache({', '.join(f'{name}={cache!r}' for name, cache in self.parts.items())})"


class Parallel(nn.Module):
    """The parts, built (andrea.mixers.layers.build_mixers), by name; the layer's output is their sum."""

    name = PARALLEL

    def __init__(self, parts: Mapping[str, nn.Module], heads: Mapping[str, int | None]) -> None:
        super().__init__()
        self.parts = nn.ModuleDict(dict(parts))
        self.heads = dict(heads)  # each part's heads on the maps, in order

    @property
    def proj(self) -> nn.Linear:
        """The first part's W_O (its width is the layer's); every part's: andrea.mixers.base.head_writers."""
        return self.parts[next(iter(self.parts))].proj  # type: ignore[return-value]

    def forward(
        self, x: Tensor, mask: object = None, return_weights: bool = False, cache: ParallelCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) -> the parts' outputs summed (B, T, D), and their weights side by side (B, ΣH, T, S)."""
        outputs, weights = [], []
        for name, part in self.parts.items():
            kept = None if cache is None else cache.parts[name]
            y, w = part(x, mask=mask, return_weights=return_weights, cache=kept)
            outputs.append(y)
            weights += [] if w is None else [w]
        summed = torch.stack(outputs).sum(0)
        return summed, torch.cat(weights, dim=1) if return_weights and weights else None

    def new_cache(self) -> ParallelCache:
        return ParallelCache({name: part.new_cache() for name, part in self.parts.items()})  # type: ignore[operator]

    def cache_size(self) -> CacheSize:
        """The parts' caches together: their states, and their tokens, at most the parts' look-back where they keep
        one alike (parts of unlike look-backs are counted as keeping every token, an upper bound)."""
        sizes = [part.cache_size() for part in self.parts.values()]  # type: ignore[operator]
        windows = {size.max_tokens for size in sizes if size.per_token}
        return CacheSize(
            per_token=sum(size.per_token for size in sizes),
            per_sequence=sum(size.per_sequence for size in sizes),
            max_tokens=next(iter(windows)) if len(windows) == 1 else None,
            conv=sum(size.conv for size in sizes),
        )

    def hook_points(self) -> dict[str, HookPoint]:
        points: dict[str, HookPoint] = {}
        for name, part in self.parts.items():
            points |= prefixed(part.hook_points(), f"{name}.")  # type: ignore[operator]
        return points

    def extra_repr(self) -> str:
        return "the parts' outputs summed: " + " + ".join(self.parts)
