"""Token mixers: what a layer mixes across positions with, attention the first of them (andrea.mixers.base)."""

from andrea.mixers.base import CacheSize, MixerCache, TokenMixer, head_writers, residual_writers
from andrea.mixers.layer_spec import LayerSpec, resolve_layers
from andrea.mixers.layers import build_mixers, mixer_registry

__all__ = [
    "CacheSize", "LayerSpec", "MixerCache", "TokenMixer", "build_mixers", "mixer_registry",
    "head_writers", "residual_writers", "resolve_layers",
]  # fmt: skip
