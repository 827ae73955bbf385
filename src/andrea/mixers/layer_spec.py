"""A network resolved once into one description per layer: each layer's token mixer and every setting it is built
with, worked out from model.net's `mixer` and `layout` (andrea.mixers.layers: checked there, refused by name) and
then read, not worked out again, by whatever needs the layers: the build, the config checks, the model-file schema
and the memory estimate.

    resolve_layers([gla, attention], n_layer=4, mixer={name: gla, expand_k: 1.0})
    -> (LayerSpec(0, "gla", {expand_k: 1.0}), LayerSpec(1, "attention", {}), LayerSpec(2, "gla", ...), ...)

An attention layer's settings are the network's attention settings (heads, backend, mechanism, mask, position),
one for every attention layer today."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from andrea.mixers.layers import ATTENTION, layer_kinds, mixer_settings


@dataclass(frozen=True)
class LayerSpec:
    """Layer `index`'s token mixer (a registered name) and its settings beyond the network's place (read-only)."""

    index: int
    mixer: str
    settings: Mapping[str, Any]

    @property
    def attention(self) -> bool:
        return self.mixer == ATTENTION


def resolve_layers(
    layout: Sequence[str] | None, n_layer: int, mixer: Mapping[str, Any] | None = None, key: str = "model.net."
) -> tuple[LayerSpec, ...]:
    """Each layer's spec, first to last; a layout, mixer or setting that cannot be is refused (SettingError, naming
    the key under `key`)."""
    kinds = layer_kinds(layout, n_layer, mixer, key)
    settings = {kind: MappingProxyType(mixer_settings(kind, mixer)) for kind in dict.fromkeys(kinds)}
    return tuple(LayerSpec(index, kind, settings[kind]) for index, kind in enumerate(kinds))
