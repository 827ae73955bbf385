"""model.net made to say what its layers are, before any check reads it: each layer kind's defaults, and no
attention block on a network without attention.

A layer kind's defaults are written once: its mixer's config group (conf/mixer/<name>.yaml, or a plugin's).

`mixer=gla` takes conf/mixer/gla.yaml; a kind whose mixer is gla (model.net.kinds.wide: {mixer: gla,
expand_k: 1.0}), or gla named only in model.net.layout, takes the same file under its own settings, so that a
layer is the same layer however it was asked for. A kind of the `mixer` group's own mixer starts from that group
as the run has it (mixer.chunk=8 included). The file's links to other groups (n_head: ${heads.n_head}) resolve in
the run's config. Attention kinds take the attention groups through model.net.attention (andrea.mixers.attention_kind).

The files are read as data (OmegaConf.load); nothing in them is imported or called.

A GPT none of whose layers is attention keeps no attention settings (model.net.attention: null), so that its
checkpoint and export say nothing of attention it does not have.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from andrea.mixers.layers import ATTENTION, mixer_registry

GPT = "andrea.models.gpt.GPT"


def fill_kind_defaults(cfg: DictConfig) -> None:
    """model.net.kinds made whole: each mixer named only in the layout becomes a kind, and each kind of a mixer
    other than attention has its mixer group's settings under its own. Nothing for a network without kinds."""
    net = OmegaConf.select(cfg, "model.net")
    if not (isinstance(net, DictConfig) and {"layout", "kinds"} <= set(net)):
        return
    group = OmegaConf.select(cfg, "model.net.mixer.name")
    unnamed = _named_only_in_layout(net, group)
    if not unnamed and not net.kinds:
        return  # null stays null: a network of the default kinds only
    with open_dict(net):
        net.kinds = net.kinds or {}
        for name in unnamed:
            net.kinds[name] = {"mixer": name}
        for name in list(net.kinds):
            defaults = _defaults(net, name, group)
            if defaults is not None:
                net.kinds[name] = OmegaConf.merge(_as_kind(defaults), net.kinds[name])


def drop_unused_attention(cfg: DictConfig) -> None:
    """model.net.attention set to null on a GPT whose layers have no attention; a network the layers of which
    cannot be worked out is left as it is (refused by name by the checks)."""
    from andrea.mixers.layer_spec import resolve_layers

    net = OmegaConf.select(cfg, "model.net")
    if not (isinstance(net, DictConfig) and net.get("_target_") == GPT and net.get("attention") is not None):
        return
    try:
        layers = resolve_layers(plain(net, "layout"), net.get("n_layer", 1), plain(net, "mixer"), plain(net, "kinds"))
    except ValueError:
        return
    if not any(layer.has_attention for layer in layers):
        net.attention = None


def plain(net: DictConfig, key: str) -> Any:
    """model.net's `key` as plain values (resolved), or None where it is unset."""
    return OmegaConf.to_container(net[key], resolve=True) if net.get(key) is not None else None


def _named_only_in_layout(net: DictConfig, group: str | None) -> list[str]:
    """The mixers the layout names that are no kind, the `mixer` group's or attention (each its own kind)."""
    taken = (group, ATTENTION, *(net.kinds or {}))
    return [str(name) for name in net.get("layout") or [] if name in mixer_registry.names() and name not in taken]


def _defaults(net: DictConfig, name: str, group: str | None) -> DictConfig | None:
    """The settings kind `name` starts from: its mixer group's (the run's own `mixer` group for that group's
    mixer); None for attention, a mixer without a config, or a kind that is not a mapping (refused later)."""
    kind = net.kinds[name]
    mixer = kind.get("mixer", name) if isinstance(kind, DictConfig) else None
    if mixer not in mixer_registry.names() or mixer == ATTENTION:
        return None
    return net.mixer if mixer == group else _group_file(str(mixer))


def _as_kind(group: DictConfig) -> DictConfig:
    """A mixer group's node as a kind's: its `name` is the kind's `mixer`, interpolations left to resolve."""
    node: dict[str, Any] = OmegaConf.to_container(group, resolve=False)  # type: ignore[assignment]
    node["mixer"] = node.pop("name")
    return OmegaConf.create(node)


def _group_file(mixer: str) -> DictConfig | None:
    """conf/mixer/<mixer>.yaml from andrea's configs or an installed plugin's config package; None where no
    package has one (a plugin mixer without a config: its class's defaults)."""
    from hydra_plugins.andrea_configs import found_config_packages

    folders = [Path(str(resources.files("andrea.conf")))]
    for _, spec in found_config_packages():
        folders += [Path(location) for location in spec.submodule_search_locations or []]
    for folder in folders:
        path = folder / "mixer" / f"{mixer}.yaml"
        if path.is_file():
            loaded = OmegaConf.load(path)
            return loaded if isinstance(loaded, DictConfig) else None
    return None
