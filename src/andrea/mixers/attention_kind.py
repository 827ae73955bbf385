"""An attention kind's settings, as a config writes them, onto the flat settings an attention layer is built with.

A kind of model.net.kinds whose mixer is attention takes the attention groups' keys, each defaulting to the
network's attention (the heads/, attention/, mechanism/, mask/, selection/ and position/ groups):

    mask: {name: sliding_window, window: 8}     as the mask group (or an expression); replaces the default mask
    position: {kind: rope, base: 1e6, fraction: 0.25}    rope, alibi or none; RoPE's base; the share it turns;
              yarn: {factor: 32, ...}, interleaved: true, temperature: {scale: 0.1, floor: 8192}
                                                        YaRN; RoPE on adjacent pairs; a query temperature
    heads: {n_head: 8, n_kv_head: 2, latent: ...}        as the heads group
    mechanism: sink, or {name: sink, learned: false}     as the mechanism group; replaces the default
    selection: {name: dsa, topk: 64}                     as the selection group; replaces the default
    backend: eager, backend_options: {...}               as the attention group

    attention_settings({n_head: 4, mask: causal, position: rope, ...}, {mask: {name: sliding_window, window: 8}})
    -> {n_head: 4, mask: {name: sliding_window, window: 8}, position: rope, ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from andrea.attention.spec import CONFIG_KEYS, NETWORK, AttentionSpec
from andrea.utils.rules import SettingError

# heads.<key> -> the spec's setting
HEADS = {"n_head": "n_head", "n_kv_head": "n_kv_head", "latent": "latent", "head_dim": "head_dim"}
# position.<key> -> the spec's setting
POSITION = {"kind": "position", "base": "rope_base", "fraction": "rope_fraction", "yarn": "rope_yarn",
            "interleaved": "rope_interleaved", "temperature": "temperature"}  # fmt: skip
WHOLE = ("mask", "mechanism", "selection", "backend", "backend_options")  # each replaces the default whole
KEYS = ("backend", "backend_options", "heads", "mask", "mechanism", "position", "selection")  # an attention kind's
IN_LAYER = ("rope", "alibi", "none")  # the positions a layer can have (learned ones are the embedding's)


def attention_settings(defaults: Mapping[str, Any], kind: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The flat settings of an attention layer of this kind: `defaults` (the network's attention, flat), with the
    kind's own settings (as a config nests them) in their place. `where`: the kind's key, e.g.
    `model.net.kinds.local.`; a key the kind cannot have is refused by name."""
    settings = dict(defaults)
    for key, value in kind.items():
        if key not in KEYS:
            raise SettingError(f"{where}{key}", f"is not a setting of an attention kind; its settings are {_keys()}")
        if key in WHOLE:
            settings[key] = value
        else:
            settings |= _nested(key, value, HEADS if key == "heads" else POSITION, where)
    _keep_mha(settings, defaults, kind)
    _check_position(settings, kind, where)
    return settings


def names_of(where: str) -> dict[str, str]:
    """How a kind's settings are named in a refusal: its own keys under `where`, the network's sizes as config
    keys (model.net.d_model)."""
    flat = {value: f"{where}heads.{key}" for key, value in HEADS.items()}
    flat |= {value: f"{where}position.{key}" for key, value in POSITION.items()}
    return {name: flat.get(name, f"{where}{name}") for name in CONFIG_KEYS if name not in NETWORK} | {
        name: CONFIG_KEYS[name] for name in NETWORK if name != "position"
    }


def checked_layer(settings: Mapping[str, Any], place: Mapping[str, Any], where: str) -> None:
    """The attention layer's spec with the network's sizes (`place`) holds every rule, or a SettingError naming
    the kind's key."""
    from andrea.attention.registry import as_mask

    sizes = {key: place[key] for key in NETWORK if key in place and key != "position"}
    names = names_of(where)
    AttentionSpec.read({**settings, **sizes}, names).checked(names)
    try:
        as_mask(settings.get("mask"))  # its fields checked by the mask itself
    except ValueError as err:
        message = str(err).splitlines()[0]
        key, _, problem = message.partition("=")
        if key.startswith("mask.") and " " not in key:  # the mask names its field: mask.window=0 must be ...
            raise SettingError(f"{where}{key}", f"={problem}") from None
        raise SettingError(f"{where}mask", f"={settings.get('mask')!r}: {message}") from None


def _nested(key: str, value: object, fields: Mapping[str, str], where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        example = "{n_head: 8, n_kv_head: 2}" if key == "heads" else "{kind: rope, base: 10000, fraction: 0.25}"
        raise SettingError(f"{where}{key}", f"={value!r} must be a mapping, e.g. {key}={example}")
    unknown = sorted(str(name) for name in value if name not in fields)
    if unknown:
        raise SettingError(f"{where}{key}.{unknown[0]}", f"is not a setting of {key}; give {', '.join(fields)}")
    return {fields[str(name)]: given for name, given in value.items()}


def _keep_mha(settings: dict[str, Any], defaults: Mapping[str, Any], kind: Mapping[str, Any]) -> None:
    """A kind that gives its own query heads over a default of one key head per query head stays MHA (its key
    heads follow), instead of becoming GQA by keeping the default's count."""
    heads = kind.get("heads") or {}
    default_mha = defaults.get("n_kv_head") in (None, defaults.get("n_head"))
    if "n_head" in heads and "n_kv_head" not in heads and default_mha:
        settings["n_kv_head"] = None


def _check_position(settings: Mapping[str, Any], kind: Mapping[str, Any], where: str) -> None:
    """A layer's position is one a layer has (rope, alibi, none); RoPE's base and fraction need RoPE."""
    position = kind.get("position") or {}
    if "kind" in position and position["kind"] not in IN_LAYER:
        raise SettingError(
            f"{where}position.kind",
            f"={position['kind']!r} is not a layer's position; give {', '.join(IN_LAYER)} (learned positions are "
            "the network's embedding: position=learned)",
        )
    for key in ("base", "fraction", "yarn", "interleaved"):
        if key in position and settings.get("position") != "rope":
            raise SettingError(
                f"{where}position.{key}",
                f"turns RoPE, and this kind's position is {settings.get('position')}; add position.kind=rope",
            )


def _keys() -> str:
    return ", ".join(KEYS)
