"""A network's token mixers sized before anything is built: each layer's mixer built on the meta device (its
parameters and state counted exactly, a plugin's like ours), and the `mixer` settings that grow them, for the
memory estimate (andrea.models.memory) to name the one to lower."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from andrea.models.files.schema import NetSpec


def mixer_layers(spec: NetSpec) -> list[nn.Module | None]:
    """Each layer's mixer built on the meta device (nothing allocated; a plugin's mixer counted like ours), or
    None for an attention layer of the network's own attention (counted from its spec); a named attention kind is
    built like any mixer. A mixer the settings cannot build gives MixerSizeError."""
    import torch

    from andrea.mixers.layer_spec import resolve_layers
    from andrea.mixers.layers import build_mixers

    f = spec.fields
    attention = {**(spec.attention or {}), "position": f.get("position", "none")}
    layers = resolve_layers(f.get("layout"), f["n_layer"], f.get("mixer"), f.get("kinds"), attention)
    place = dict(d_model=f["d_model"], max_context=f["max_context"], dropout=0.0, bias=bool(f.get("bias")))
    built: dict[str, nn.Module] = {}
    one_of_each = {layer.kind: layer for layer in layers if not (layer.attention and layer.kind == layer.mixer)}
    for kind, layer in sorted(one_of_each.items()):
        try:
            with torch.device("meta"):
                (built[kind],) = build_mixers([replace(layer, index=0)], **place, n_layer=f["n_layer"])
        except (RuntimeError, TypeError, ValueError, OverflowError) as err:  # a size no tensor can have
            if layer.attention and isinstance(err, ValueError):  # an attention kind's setting, refused by its key
                raise
            raise _too_big(spec, kind, err) from None
    return [built.get(layer.kind) for layer in layers]


def _too_big(spec: NetSpec, kind: str, err: Exception) -> MixerSizeError:
    """The `mixer` setting furthest above its default, named as what cannot be built."""
    grown = mixer_growth(spec)
    largest = max(grown, key=lambda key: grown[key][0] / grown[key][1], default=f"mixer.name={kind}")
    setting = f"{largest}={grown[largest][0]}" if largest in grown else largest
    return MixerSizeError(f"{setting}: mixer {kind} cannot be built ({str(err).splitlines()[0]})")


def mixer_growth(spec: NetSpec) -> dict[str, tuple[float, float]]:
    """The `mixer` group's sizes, each as (value, the mixer's default): where a too-big estimate looks for the
    setting to lower ({"mixer.d_state": (10000000, 16)})."""
    import inspect

    from andrea.mixers.layers import mixer_registry

    mixer = spec.fields.get("mixer") or {}
    name = mixer.get("name")
    if name not in mixer_registry.names():
        return {}
    defaults = {k: p.default for k, p in inspect.signature(mixer_registry.load(name)).parameters.items()}
    return {
        f"mixer.{key}": (value, defaults[key])
        for key, value in mixer.items()
        if _size(value) and _size(defaults.get(key)) and defaults[key] > 0
    }


def _size(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MixerSizeError(ValueError):
    """A mixer whose settings ask for a tensor larger than any device holds: "mixer.<key>=<value>: ..."."""


def count(module: nn.Module) -> int:
    """The parameters of a module (a meta one's included)."""
    return sum(p.numel() for p in module.parameters())
