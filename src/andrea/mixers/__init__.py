"""Token mixers: what a layer mixes across positions with, attention the first of them (andrea.mixers.base)."""

from andrea.mixers.base import CacheSize, MixerCache, TokenMixer
from andrea.mixers.layers import build_mixers, layer_kinds, mixer_registry

__all__ = ["CacheSize", "MixerCache", "TokenMixer", "build_mixers", "layer_kinds", "mixer_registry"]
