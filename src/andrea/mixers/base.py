"""The token-mixer seam: a network's layer is `x + mixer(norm(x))` (then the MLP, in the GPT), and the mixer
of each layer is a part the config names (`mixer=`, `model.net.layout`). Attention
(andrea.attention.MultiHeadSelfAttention, with every attention group) is the first; the mixers that are not
softmax attention (linear attention, retention, ...) answer the same calls:

    mixer(x, mask=None, return_weights=False, cache=None) -> y, weights
        x, y (B, T, D); weights (B, H, T, S) where the mixer has weights for the maps (attention's; the
        implied weights of a linear mixer), else None; with a cache, x holds only the tokens not yet seen;
        `mask` a per-batch mask (packed documents, key padding) ANDed with the mixer's own
    mixer.new_cache()      an empty cache for generation: a KV cache, a fixed-size state, ...; its
                           `next_position` is the absolute position of the next token
    mixer.hook_points()    its points by name; a network lists them under `blocks.<layer>.attn.` whatever the
                           mixer (as fla names each layer's mixer `attn`), so the lens addresses every layer alike
    mixer.cache_size()     the numbers its cache keeps for a sequence (CacheSize)
    mixer.proj             the Linear that writes into the residual stream

A mixer is built per layer: `cls(d_model=, max_context=, layer=, n_layer=, dropout=, bias=, **settings)`, its
settings from the `mixer` config group (andrea.mixers.layers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from torch import Tensor, nn

from andrea.core.cache_size import CacheSize

if TYPE_CHECKING:
    from andrea.core.hook_points import HookPoint

__all__ = ["CacheSize", "MixerCache", "TokenMixer", "head_writers", "mixer_parts", "residual_writers"]


class MixerCache(Protocol):
    """What a network reads of any layer's cache."""

    @property
    def next_position(self) -> int:
        """The absolute position of the next token to come."""
        ...


@runtime_checkable
class TokenMixer(Protocol):
    proj: nn.Linear  # what writes into the residual stream (the GPT scales its initial weights by 1/sqrt(2·n_layer))

    def __call__(
        self, x: Tensor, mask: Any = None, return_weights: bool = False, cache: Any = None
    ) -> tuple[Tensor, Tensor | None]: ...

    def new_cache(self) -> MixerCache: ...

    def hook_points(self) -> dict[str, HookPoint]: ...

    def cache_size(self) -> CacheSize: ...


def mixer_parts(mixer: object) -> dict[str, nn.Module]:
    """A parallel layer's parts by name (andrea.mixers.parallel); {} for a layer of one mixer."""
    parts = getattr(mixer, "parts", None)
    return dict(parts.items()) if isinstance(parts, nn.ModuleDict) else {}


def head_writers(mixer: TokenMixer) -> list[tuple[str, nn.Linear]]:
    """Where a mixer's heads write into the residual stream: (the hook point of the heads' outputs under the
    layer's `attn.`, the Linear W_O that reads them), one for a mixer, one per part for a parallel layer
    (andrea.mixers.parallel), in the order the maps draw their heads."""
    parts = mixer_parts(mixer)
    if parts:
        return [(f"{name}.hook_z", cast(TokenMixer, part).proj) for name, part in parts.items()]
    return [("hook_z", mixer.proj)]


def residual_writers(mixer: TokenMixer) -> list[nn.Linear]:
    """The Linears a mixer writes into the residual stream with (head_writers'), whose initial weights the GPT
    scales by 1/sqrt(2·n_layer)."""
    return [proj for _, proj in head_writers(mixer)]
