"""`${andrea.class_default:}`: a mixer setting's default, read from the mixer's own class, so that it is written once.

A mixer's config group names each of its settings, so that `mixer.expand_k=1.0` is an override like any other
and `--cfg job` lists them; the value itself is the keyword default of the class the mixer is registered as
(andrea.mixers.layers.mixer_registry, a plugin's too), which the Python API uses as well:

    # conf/mixer/gla.yaml
    name: gla
    expand_k: ${andrea.class_default:}     # GLA(..., expand_k=0.5): 0.5

The key is the node's own; the mixer is its parent's `name` (a mixer group) or `mixer` (a layer kind,
model.net.kinds). Resolved when the config is, so that composing it (andrea-train --help) imports no torch.
"""

from __future__ import annotations

import inspect
from typing import Any

from omegaconf import Node


def class_default(*, _node_: Node, _parent_: Any) -> Any:
    """The keyword default, in the class of the mixer `_parent_` names, of the setting `_node_` holds."""
    from andrea.mixers.layers import mixer_registry

    name, key = _parent_.get("name", _parent_.get("mixer")), _node_._key()
    if name not in mixer_registry.names():
        raise ValueError(f"{key}=${{andrea.class_default:}} is read from a mixer's class, and {name!r} is no mixer")
    parameter = inspect.signature(mixer_registry.load(name)).parameters.get(str(key))
    if parameter is None or parameter.default is inspect.Parameter.empty:
        raise ValueError(f"mixer.{key}: mixer {name} has no default for it; give mixer.{key}=<value>")
    return parameter.default
