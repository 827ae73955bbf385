"""Which mixer each layer of a network has, and the layers built (the token-mixer seam, andrea.mixers.base).

    model.net.mixer    the `mixer` config group: {name: attention} (the default), or another mixer's name
                       with its settings
    model.net.layout   null: every layer the mixer; or a list of mixer names repeated to n_layer
                       ([gla, gla, gla, attention] on 12 layers: three of each four gla), its length a
                       divisor of n_layer. A name other than the mixer's takes that mixer's defaults.

Attention layers take the network's attention settings (heads, backend, mechanism, mask, position), built
once for every layer to share where they can (one backend, one mask).

A third-party package adds a mixer without touching andrea:

    [project.entry-points."andrea.mixers"]
    my_mixer = "my_pkg.mixer:MyMixer"     # an nn.Module answering the calls of andrea.mixers.base
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from andrea.attention.block import MultiHeadSelfAttention, shared_parts
from andrea.attention.plugins import Registry
from andrea.mixers.settings import check_settings
from andrea.utils.rules import SettingError

if TYPE_CHECKING:
    from andrea.mixers.layer_spec import LayerSpec

ATTENTION = "attention"
mixer_registry: Registry[nn.Module] = Registry(
    "token mixer",
    "andrea.mixers",
    {
        ATTENTION: "andrea.attention.block:MultiHeadSelfAttention",
        "linear": "andrea.mixers.linear:LinearAttention",
        "gla": "andrea.mixers.gla:GLA",
        "retention": "andrea.mixers.retention:Retention",
        "mamba2": "andrea.mixers.mamba2:Mamba2",
        "deltanet": "andrea.mixers.deltanet:DeltaNet",
        "gated_deltanet": "andrea.mixers.deltanet:GatedDeltaNet",
    },
)
PLACE = ("d_model", "max_context", "layer", "n_layer", "dropout", "bias")  # what the network gives every mixer


def broken_mixers() -> list[str]:
    """One line per installed plugin mixer (entry-point group `andrea.mixers`) that cannot be loaded."""
    return mixer_registry.broken()


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


def layer_kinds(
    layout: Sequence[str] | None, n_layer: int, mixer: Mapping[str, Any] | None = None, key: str = "model.net."
) -> list[str]:
    """Each layer's mixer name, first to last: `layout` repeated to n_layer, or the mixer's name in every layer.
    The `mixer` group's settings are checked here too (mixer_settings), wherever the layers are worked out."""
    name = mixer_name(mixer, key)
    mixer_settings(name, mixer)
    if layout is None:
        return [name] * n_layer
    _check_names(layout, key)
    if n_layer % len(layout):
        *fits, last = [str(k) for k in range(1, n_layer + 1) if n_layer % k == 0]
        counts = f"{', '.join(fits)} or {last} names" if fits else f"{last} name"
        problem = f"has {len(layout)} names, which does not divide {key}n_layer={n_layer}; give {counts}"
        raise SettingError(f"{key}layout", problem)
    return [str(name) for name in layout] * (n_layer // len(layout))


def _check_names(layout: object, key: str) -> None:
    if isinstance(layout, str) or not isinstance(layout, Sequence) or not layout:
        raise SettingError(f"{key}layout", f"={layout!r} must be a list of mixer names, e.g. [{ATTENTION}], or null")
    known = mixer_registry.names()
    for kind in layout:
        if kind not in known:
            raise SettingError(f"{key}layout", f"names {kind!r}, which is not a token mixer; use {', '.join(known)}")


def mixer_settings(name: str, mixer: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings a layer of mixer `name` is built with: the `mixer` group's when it names this mixer, else
    the mixer's defaults; a setting the mixer does not take, or a value its type or range does not keep
    (andrea.mixers.settings), is refused by name."""
    if mixer is None or mixer.get("name") != name:
        return {}
    settings = {str(key): value for key, value in mixer.items() if key != "name"}
    unknown = sorted(set(settings) - _settings_of(name))
    if unknown:
        raise SettingError(f"mixer.{unknown[0]}", f"is not a setting of mixer {name}; its settings are {_offer(name)}")
    if name != ATTENTION:
        check_settings(name, mixer_registry.load(name), settings, PLACE)
    return settings


def mixer_heads(name: str, mixer: Mapping[str, Any] | None) -> int | None:
    """The heads a layer of mixer `name` (not attention) has: its `n_head` setting or default; None for a mixer
    without one."""
    given = mixer_settings(name, mixer).get("n_head")
    if given is not None:
        return int(given)
    default = inspect.signature(mixer_registry.load(name)).parameters.get("n_head")
    return default.default if default is not None and isinstance(default.default, int) else None


def _settings_of(name: str) -> set[str]:
    """The settings a mixer takes of its own; attention's are the attention config groups, not `mixer.*`."""
    if name == ATTENTION:
        return set()
    return set(inspect.signature(mixer_registry.load(name)).parameters) - set(PLACE)


def _offer(name: str) -> str:
    if name == ATTENTION:
        return "the heads/, attention/, mechanism/, mask/ and position/ groups"
    return ", ".join(f"mixer.{key}" for key in sorted(_settings_of(name))) or "no settings"


def build_mixers(layers: Sequence[LayerSpec], attention: Mapping[str, Any], **place: Any) -> list[nn.Module]:
    """One mixer per layer spec (andrea.mixers.layer_spec). `place`: d_model, max_context, dropout, bias
    (andrea.mixers.base); `attention`: the attention layers' settings (position included)."""
    shared = shared_parts(dict(attention)) if any(spec.attention for spec in layers) else {}  # one backend, one mask
    built: list[nn.Module] = []
    for spec in layers:
        where = dict(place, layer=spec.index, n_layer=len(layers))
        if spec.attention:
            built.append(MultiHeadSelfAttention(where.pop("d_model"), **where, **shared))
        else:
            built.append(mixer_registry.load(spec.mixer)(**where, **spec.settings))
    return built
