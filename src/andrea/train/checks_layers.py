"""Each layer of the network, checked from the config before anything is built: its kind and mixer resolved
(andrea.mixers.layer_spec), the attention settings of a network without attention, the maps' head grid, and each
attention kind's parts (its backend and mask), built here once, checked against the data's length and the device
training runs on, and handed to the network's build (andrea.train.config) so that nothing is built twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from andrea.attention import UnsupportedAttentionError
from andrea.attention.block import shared_parts
from andrea.attention.masks import Mask
from andrea.attention.positions import ALiBi
from andrea.attention.registry import mechanism_registry
from andrea.attention.spec import AttentionSpec
from andrea.mixers.layer_spec import LayerSpec, resolve_layers
from andrea.models.files.schema import MODELS
from andrea.train.checks_data import ints
from andrea.train.errors import ConfigError
from andrea.train.kind_defaults import GPT, plain
from andrea.utils.rules import SettingError


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def check_mixers(cfg: DictConfig, layers: tuple[LayerSpec, ...]) -> None:
    """The network's layers (network_layers) against the rest of the config: the attention settings of a network
    without attention; the attention maps callback, whose (layer, head) grid needs one head count in every layer.
    All before anything is built."""
    others = sorted({layer.mixer for layer in layers if not layer.has_attention})
    if layers and len(others) == len({layer.mixer for layer in layers}):
        _refuse_attention_settings(cfg, others)
    if others and _get(cfg, "callbacks.attention_maps") is not None:
        _check_maps_grid(layers)


def _check_maps_grid(layers: tuple[LayerSpec, ...]) -> None:
    """The attention maps callback scores one (layer, head) grid: one head count in every layer."""
    heads = dict(sorted({layer.kind: layer.n_head for layer in layers}.items()))
    if len(set(heads.values())) > 1:
        counts = ", ".join(f"{kind} {n}" for kind, n in heads.items())
        raise ConfigError(
            f"callbacks.attention_maps scores one (layer, head) grid, and the layers' heads differ ({counts}); "
            "give mixer.n_head the attention's head count, or add ~callbacks.attention_maps"
        )


def _refuse_attention_settings(cfg: DictConfig, mixers: list[str]) -> None:
    """An attention group set away from its default on a network with no attention layer would change nothing
    while a run (and a sweep's label) says it did: refused, naming the group."""
    mechanism = _get(cfg, "mechanism.name")  # the groups: the network keeps no attention settings now
    backend = _get(cfg, "attention.backend")
    applied = {
        f"mechanism={mechanism}": mechanism not in (None, "softmax"),
        f"attention={backend}": backend != AttentionSpec.backend,
        f"position={_get(cfg, 'model.net.position')}": _get(cfg, "model.net.position") in ("rope", "alibi"),
        f"mask={_get(cfg, 'mask.name')}": _get(cfg, "mask.name") not in (None, "causal"),
    }
    for setting, set_away in applied.items():
        if set_away:
            raise ConfigError(
                f"{setting} applies to attention layers, and this network has none (its layers are "
                f"{', '.join(mixers)}); drop {setting.split('=')[0]}=, or add attention to model.net.layout"
            )


def _andreas_net(cfg: DictConfig) -> DictConfig | None:
    """model.net where it is one of andrea's networks with layers; None for a user's `_target_`, or the toy
    model's no-attention ablation (no layers at all)."""
    net = _get(cfg, "model.net")
    if net is None or net.get("_target_") not in MODELS:
        return None
    return net if net.get("attention") is not None or net.get("_target_") == GPT else None


def network_layers(cfg: DictConfig) -> tuple[LayerSpec, ...]:
    """Each layer's spec (andrea.mixers.layer_spec: a layout or kind that cannot be is refused here), resolved once
    for every check that reads the layers; () for a network andrea does not build (a user's `_target_`)."""
    net = _andreas_net(cfg)
    if net is None:
        return ()
    given = {key: plain(net, key) for key in ("mixer", "layout", "kinds", "attention")}
    attention = {**(given["attention"] or {}), "position": net.get("position")}
    place = {key: net.get(key) for key in ("d_model", "max_context", "bias", "dropout") if key in net}
    try:
        return resolve_layers(given["layout"], net.get("n_layer", 1), given["mixer"], given["kinds"], attention, place)
    except SettingError as err:
        raise ConfigError(str(err)) from None


@dataclass
class AttentionParts:
    """The attention parts the checks built once: the network's attention (model.net.attention) and each named
    attention kind (model.net.kinds) with its backend and mask built in place, for the network to build from."""

    attention: dict[str, Any] | None  # None: a network without attention layers
    kinds: dict[str, Any]


def attention_parts(cfg: DictConfig, layers: tuple[LayerSpec, ...], on_cpu: bool) -> AttentionParts | None:
    """model.net.attention and each attention kind with its backend and mask built once for its layers, each
    checked against the data's length and the device, and a mask that sees later tokens refused beside a
    recurrent layer; None for a network andrea does not build (a user's `_target_`) or without attention."""
    net = _andreas_net(cfg)
    if net is None:
        return None
    attention = plain(net, "attention")
    default = None if attention is None else _checked_parts(cfg, attention, "", on_cpu)
    kinds = dict(plain(net, "kinds") or {})
    masks = _build_named_kinds(cfg, layers, kinds, on_cpu) | _checked_part_masks(cfg, layers, on_cpu)
    if default is not None and any(layer.attention and f"model.net.kinds.{layer.kind}.mask" not in masks
                                   for layer in layers):  # fmt: skip
        masks["mask"] = default["mask"]
    _refuse_lookahead(layers, masks)
    return AttentionParts(default, kinds)


def _build_named_kinds(
    cfg: DictConfig, layers: tuple[LayerSpec, ...], kinds: dict[str, Any], on_cpu: bool
) -> dict[str, Mask]:
    """Each named attention kind's backend and mask built and checked once, put in its place in `kinds` where
    the kind sets them; {the kind's mask key: its mask as built}."""
    masks = {}
    named = {layer.kind: layer.settings for layer in layers if layer.attention and layer.kind in kinds}
    for name, settings in named.items():
        built = _checked_parts(cfg, dict(settings), f"model.net.kinds.{name}.", on_cpu)
        kinds[name] = kinds[name] | {key: built[key] for key in ("mask", "backend") if key in kinds[name]}
        masks[f"model.net.kinds.{name}.mask"] = built["mask"]
    return masks


def _checked_part_masks(cfg: DictConfig, layers: tuple[LayerSpec, ...], on_cpu: bool) -> dict[str, Mask]:
    """Each parallel kind's attention parts checked as a named kind's are (andrea.mixers.parallel): {the part's
    mask key: its mask as built}."""
    masks = {}
    for layer in {layer.kind: layer for layer in layers if layer.parts}.values():
        for part in (part for part in layer.parts if part.attention):
            where = f"model.net.kinds.{layer.kind}.parallel.{part.kind.rsplit('.', 1)[1]}."
            masks[f"{where}mask"] = _checked_parts(cfg, dict(part.settings), where, on_cpu)["mask"]
    return masks


def _checked_parts(cfg: DictConfig, attention: dict[str, Any], where: str, on_cpu: bool) -> dict[str, Any]:
    """One kind's attention settings (flat) with its backend and mask built, checked against the data and the
    device; a refusal names the kind's key (`where`), or the attention groups' for the network's own."""
    try:
        parts = shared_parts({str(key): value for key, value in attention.items()})
        (seq_len,) = ints(cfg, "data.seq_len")
        if seq_len:
            parts["mask"].check_context(seq_len)
    except ValueError as err:
        message = str(err).splitlines()[0]
        raise ConfigError(where + message.removeprefix("attention.") if where else message) from None
    _check_device(cfg, parts, on_cpu, where)
    return parts


def _refuse_lookahead(layers: tuple[LayerSpec, ...], masks: dict[str, Mask]) -> None:
    """A recurrent layer reads every earlier token through its state, causal by construction: an attention layer
    beside it whose mask sees later tokens (mask=none, a bidirectional window, a prefix) would leak the future
    into the network's predictions. Refused by the attention kind's mask key (`masks`: each key's built mask)."""
    recurrent = sorted({layer.mixer for layer in layers if not layer.attention})
    if not recurrent:
        return
    for key, mask in masks.items():
        if bool(torch.triu(mask.dense(16, 16), diagonal=1).any()):
            raise ConfigError(
                f"{key}={mask.name} sees later tokens, and mixer {recurrent[0]} beside it is causal by "
                f"construction; give {key} a causal mask (causal, or sliding_window with causal: true)"
            )


def _check_device(cfg: DictConfig, parts: dict[str, Any], on_cpu: bool, where: str = "") -> None:
    """A kind's shared backend on the device training runs on, with the mask, the score bias and the heads'
    width."""
    n_head, device = parts["n_head"], "cpu" if on_cpu else "cuda"
    position = parts.get("position") or _get(cfg, "model.net.position")
    alibi = ALiBi(n_head) if position == "alibi" else None
    (d_model,) = ints(cfg, "model.net.d_model")
    backend, mechanism = parts["backend"], parts.get("mechanism")
    name = "softmax" if mechanism is None else mechanism if isinstance(mechanism, str) else mechanism["name"]
    call = (parts["mask"], mechanism_registry.load(name), alibi)
    head_dim = _head_width(parts, d_model)
    try:  # what holds on every device first (as a layer checks itself when it is built), then training's device
        backend.checked(*call, device=None, needs_grad=False, head_dim=head_dim)
        backend.checked(*call, device=device, needs_grad=True, head_dim=head_dim)
    except UnsupportedAttentionError as err:
        hint = " (trainer=gpu)" if device == "cpu" else ""
        key = f"{where}backend" if where else "attention"
        raise ConfigError(f"{key}={backend.name}: {err}{hint}") from None


def _head_width(parts: dict[str, Any], d_model: int | None) -> int | None:
    """A kind's heads' width: its head_dim, or d_model / n_head (None before d_model is known)."""
    return parts.get("head_dim") or (d_model // parts["n_head"] if d_model else None)
