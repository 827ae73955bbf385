"""The token mixers andrea knows (the registry), and a network's layers built from their specs (the token-mixer
seam, andrea.mixers.base; each layer's spec, andrea.mixers.layer_spec).

The attention layers of one kind share their backend and mask, built once for the kind.

A third-party package adds a mixer without touching andrea:

    [project.entry-points."andrea.mixers"]
    my_mixer = "my_pkg.mixer:MyMixer"     # an nn.Module answering the calls of andrea.mixers.base
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from andrea.attention.block import MultiHeadSelfAttention, shared_parts
from andrea.core.plugins import Registry
from andrea.mixers.parallel import Parallel

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
        "gated_deltaproduct": "andrea.mixers.deltaproduct:GatedDeltaProduct",
        "kda": "andrea.mixers.kda:KDA",
        "rwkv7": "andrea.mixers.rwkv7:RWKV7",
    },
)
PLACE = ("d_model", "max_context", "layer", "n_layer", "dropout", "bias")  # what the network gives every mixer


def broken_mixers() -> list[str]:
    """One line per installed plugin mixer (entry-point group `andrea.mixers`) that cannot be loaded."""
    return mixer_registry.broken()


def build_mixers(layers: Sequence[LayerSpec], **place: Any) -> list[nn.Module]:
    """One mixer per layer spec (andrea.mixers.layer_spec). `place`: d_model, max_context, dropout, bias (and
    n_layer, where `layers` are not all of them) (andrea.mixers.base). The attention layers of a kind share one
    backend and one mask; a parallel layer's parts are built as layers of their own kinds."""
    shared: dict[str, dict[str, Any]] = {}
    built: list[nn.Module] = []
    for spec in layers:
        where = {"n_layer": len(layers), **place, "layer": spec.index}
        if spec.parts:
            parts = {part.kind.rsplit(".", 1)[1]: _built(part, where, shared) for part in spec.parts}
            built.append(Parallel(parts, {part.kind.rsplit(".", 1)[1]: part.n_head for part in spec.parts}))
        else:
            built.append(_built(spec, where, shared))
    return built


def _built(spec: LayerSpec, where: dict[str, Any], shared: dict[str, dict[str, Any]]) -> nn.Module:
    """One layer's mixer (or a parallel layer's part); a named kind's refusal said of the kind."""
    try:
        if spec.attention:
            if spec.kind not in shared:
                shared[spec.kind] = shared_parts(dict(spec.settings))
            place = dict(where)
            return MultiHeadSelfAttention(place.pop("d_model"), **place, **shared[spec.kind])
        return mixer_registry.load(spec.mixer)(**where, **spec.settings)
    except ValueError as err:
        if spec.kind == spec.mixer:
            raise
        raise ValueError(f"model.net.kinds.{spec.kind}: {str(err).splitlines()[0]}") from None
