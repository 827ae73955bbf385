"""A network resolved once into one description per layer: each layer's kind, its token mixer and every setting it
is built with, read, not worked out again, by whatever needs the layers (the build, the config checks, the
model-file schema, the memory estimate).

    model.net.mixer    the `mixer` config group: the default kind, in every layer when no layout is given
    model.net.kinds    named kinds: {local: {mixer: attention, mask: {name: sliding_window, window: 8}},
                       wide: {mixer: gla, expand_k: 1.0}}; an attention kind takes the attention groups' keys
                       (andrea.mixers.attention_kind), another mixer its own settings
    model.net.layout   a pattern of kind names, or mixer names (each a kind with that mixer's defaults),
                       repeated to n_layer: its length a divisor of n_layer

A kind of several mixers side by side, their outputs summed (Falcon-H1), names its parts, each a kind:
{hybrid: {parallel: {attention: {mixer: attention}, ssm: {mixer: mamba2}}}} (andrea.mixers.parallel). Its spec's
mixer is `parallel` and its settings {parts: {attention: {mixer: attention, ...}, ssm: {mixer: mamba2, ...}}};
`spec.parts` gives each part as a spec of its own.

    resolve_layers([gla, attention], n_layer=4, mixer={name: gla, expand_k: 1.0}, attention={n_head: 4, ...})
    -> (LayerSpec(0, "gla", "gla", {expand_k: 1.0}), LayerSpec(1, "attention", "attention", {n_head: 4, ...}), ...)

`spec.cache` says what each layer keeps to generate from (every token's keys and values, a window's, a latent, or a
state); the layer built from it keeps that (`cache_size()`, andrea.core.cache_size).

An attention layer's settings are flat (AttentionSpec's: n_head, n_kv_head, backend, backend_options, mechanism,
mask, latent, position, rope_base, rope_fraction): the network's attention, with its kind's own in their place.
Another mixer's are its kind's, or the `mixer` group's when it names that mixer, else the class's defaults.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from andrea.attention.registry import as_mask
from andrea.mixers.attention_kind import attention_settings, checked_layer
from andrea.mixers.layers import ATTENTION, PLACE, mixer_registry
from andrea.mixers.parallel import PARALLEL
from andrea.mixers.settings import check_settings
from andrea.utils.rules import SettingError


@dataclass(frozen=True)
class LayerSpec:
    """Layer `index`: its kind's name, its token mixer (a registered name) and its settings beyond the network's
    place (read-only)."""

    index: int
    kind: str
    mixer: str
    settings: Mapping[str, Any]

    @property
    def attention(self) -> bool:
        return self.mixer == ATTENTION

    @property
    def parts(self) -> tuple[LayerSpec, ...]:
        """A parallel layer's parts, each a spec of its own (kind `<kind>.<part>`); () for a layer of one mixer."""
        if self.mixer != PARALLEL:
            return ()
        return tuple(
            LayerSpec(self.index, f"{self.kind}.{name}", part["mixer"],
                      MappingProxyType({k: v for k, v in part.items() if k != "mixer"}))
            for name, part in self.settings["parts"].items()
        )  # fmt: skip

    @property
    def has_attention(self) -> bool:
        """Whether the layer attends: it is attention, or a part of it is."""
        return self.attention or any(part.attention for part in self.parts)

    @property
    def cache(self) -> str:
        """What the layer keeps to generate from: an attention layer its keys and values (its latent, with
        heads.latent), of every token or of its mask's look-back only (a sliding window); another mixer a state of
        a fixed size."""
        if self.parts:
            return " + ".join(part.cache for part in self.parts)
        if not self.attention:
            return "state"
        kept = "latent" if self.settings.get("latent") else "keys and values"
        lookback = as_mask(self.settings.get("mask", "causal")).max_lookback  # the spec's default
        return kept if lookback is None else f"{kept}, last {lookback} tokens"

    @property
    def n_head(self) -> int | None:
        """The layer's heads: attention's query heads, another mixer's n_head setting or default (None for a
        mixer without one)."""
        if self.parts:  # the parts' heads side by side
            return sum(part.n_head or 0 for part in self.parts)
        given = self.settings.get("n_head")
        if given is not None or self.attention:
            return None if given is None else int(given)
        default = inspect.signature(mixer_registry.load(self.mixer)).parameters.get("n_head")
        return default.default if default is not None and isinstance(default.default, int) else None


def resolve_layers(
    layout: Sequence[str] | None,
    n_layer: int,
    mixer: Mapping[str, Any] | None = None,
    kinds: Mapping[str, Any] | None = None,
    attention: Mapping[str, Any] | None = None,
    place: Mapping[str, Any] | None = None,
    key: str = "model.net.",
) -> tuple[LayerSpec, ...]:
    """Each layer's spec, first to last. `attention`: the network's attention settings (flat), every attention
    kind's defaults; `place`: the network's sizes (d_model, max_context, ...), with which each attention kind's
    layer is checked. A layout, kind, mixer or setting that cannot be is refused (SettingError, naming the key
    under `key`)."""
    default = mixer_name(mixer, key)
    table = _kinds(default, mixer, kinds or {}, dict(attention or {}), dict(place or {}), key)
    pattern = [default] * n_layer if layout is None else _pattern(layout, n_layer, table, key)
    unused = sorted(set(kinds or {}) - set(pattern))
    if unused:
        raise SettingError(
            f"{key}kinds.{unused[0]}",
            f"is in no layer of {key}layout={list(layout or [])}: add it to the layout, or drop the kind",
        )
    return tuple(LayerSpec(index, name, *table[name]) for index, name in enumerate(pattern))


def mixer_name(mixer: Mapping[str, Any] | None, key: str = "model.net.") -> str:
    """The mixer a `mixer` setting names ({name: ..., settings}); None: attention. `key`: where its keys live."""
    if mixer is None:
        return ATTENTION
    name = mixer.get("name") if isinstance(mixer, Mapping) else None
    if not isinstance(name, str) or name not in mixer_registry.names():
        raise SettingError(
            f"{key}mixer",
            f"={mixer!r} is not a token mixer: give mixer=<name>, one of {', '.join(mixer_registry.names())}",
        )
    return name


Kind = tuple[str, Mapping[str, Any]]  # a kind's mixer and its settings


def _kinds(
    default: str, mixer: Mapping[str, Any] | None, kinds: Mapping[str, Any], attention: dict[str, Any],
    place: dict[str, Any], key: str,
) -> dict[str, Kind]:  # fmt: skip
    """Every kind a layout may name: each mixer by its name (the `mixer` group's settings for its own, attention's
    defaults for attention, else the class's defaults), then the named kinds, each checked."""
    own = {str(k): v for k, v in (mixer or {}).items() if k != "name"}
    if default == ATTENTION and own:
        raise SettingError(
            f"mixer.{sorted(own)[0]}",
            "is not a setting of mixer attention; its settings are the heads/, attention/, mechanism/, mask/ and "
            "position/ groups, or a kind's (model.net.kinds)",
        )
    table: dict[str, Kind] = {name: (name, {}) for name in mixer_registry.names()}
    table[ATTENTION] = (ATTENTION, MappingProxyType(attention))
    if default != ATTENTION:
        table[default] = (default, MappingProxyType(_settings(default, own, "mixer.")))
    for name, given in kinds.items():
        table[str(name)] = _kind(str(name), given, attention, place, f"{key}kinds.{name}.")
    return table


def _kind(name: str, given: object, attention: dict[str, Any], place: dict[str, Any], where: str) -> Kind:
    if not isinstance(given, Mapping):
        raise SettingError(where[:-1], f"={given!r} must be a mapping of a mixer and its settings, e.g. {{mixer: gla}}")
    if PARALLEL in given:
        return PARALLEL, MappingProxyType({"parts": _parts(given, attention, place, where)})
    mixer = given.get("mixer", name if name in mixer_registry.names() else None)
    if mixer not in mixer_registry.names():
        known = ", ".join(mixer_registry.names())
        raise SettingError(f"{where}mixer", f"={mixer!r} is not a token mixer; give {where}mixer=<one of {known}>")
    settings = {str(k): v for k, v in given.items() if k != "mixer"}
    if mixer != ATTENTION:
        return mixer, MappingProxyType(_settings(mixer, settings, where))
    flat = attention_settings(attention, settings, where)
    if place:
        checked_layer(flat, place, where)
    return ATTENTION, MappingProxyType(flat)


def _parts(given: Mapping[str, Any], attention: dict[str, Any], place: dict[str, Any], where: str) -> dict[str, Any]:
    """A parallel kind's parts, each resolved as a kind of its own: {part: {mixer: ..., its settings}}."""
    others = sorted(str(key) for key in given if key != PARALLEL)
    if others:
        raise SettingError(f"{where}{others[0]}", f"is not a setting of a parallel kind; set it in a part, "
                           f"{where}{PARALLEL}.<part>.{others[0]}")  # fmt: skip
    parts = given[PARALLEL]
    if not isinstance(parts, Mapping) or len(parts) < 2:
        named = f"names {len(parts)} ({', '.join(map(str, parts))})" if isinstance(parts, Mapping) else f"={parts!r}"
        raise SettingError(
            f"{where}{PARALLEL}",
            f"{named}; give two parts or more, each a kind, e.g. {{attention: {{mixer: attention}}, ssm: {{mixer: "
            "mamba2}}",
        )
    resolved = {}
    for name, part in parts.items():
        if isinstance(part, Mapping) and PARALLEL in part:
            raise SettingError(f"{where}{PARALLEL}.{name}", "is parallel itself; a part is one mixer")
        mixer, settings = _kind(str(name), part, attention, place, f"{where}{PARALLEL}.{name}.")
        resolved[str(name)] = {"mixer": mixer, **settings}
    return resolved


def _pattern(layout: object, n_layer: int, table: Mapping[str, Kind], key: str) -> list[str]:
    """The layout's kind names repeated to n_layer; a name no kind has, or a length not dividing n_layer, refused."""
    if isinstance(layout, str) or not isinstance(layout, Sequence) or not layout:
        raise SettingError(f"{key}layout", f"={layout!r} must be a list of kind or mixer names, e.g. [{ATTENTION}]")
    for name in layout:
        if name not in table:
            offered = ", ".join(sorted(table))
            raise SettingError(f"{key}layout", f"names {name!r}, which is no kind or token mixer; use {offered}")
    return _repeated([str(name) for name in layout], n_layer, key)


def _repeated(layout: list[str], n_layer: int, key: str) -> list[str]:
    if n_layer % len(layout):
        *fits, last = [str(k) for k in range(1, n_layer + 1) if n_layer % k == 0]
        counts = f"{', '.join(fits)} or {last} names" if fits else f"{last} name"
        problem = f"has {len(layout)} names, which does not divide {key}n_layer={n_layer}; give {counts}"
        raise SettingError(f"{key}layout", problem)
    return layout * (n_layer // len(layout))


def _settings(name: str, settings: dict[str, Any], where: str) -> dict[str, Any]:
    """A mixer's own settings: a setting it does not take, or a value its type or range does not keep
    (andrea.mixers.settings), refused by name under `where`."""
    takes = set(inspect.signature(mixer_registry.load(name)).parameters) - set(PLACE)
    unknown = sorted(set(settings) - takes)
    if unknown:
        offered = ", ".join(f"{where}{k}" for k in sorted(takes)) or "no settings"
        raise SettingError(f"{where}{unknown[0]}", f"is not a setting of mixer {name}; its settings are {offered}")
    check_settings(name, mixer_registry.load(name), settings, PLACE, where)
    return settings
