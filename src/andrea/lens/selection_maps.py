"""What a map shows of a layer that chooses its keys from the data (andrea.attention.selection): the weights its
heads would give every key the mask allows, with the keys the selection left out marked, so a map tells chosen,
left out and masked apart, and a strong weight on a key left out (a key the selection missed) shows.

    selection_maps(net, ids) -> {layer: SelectionMap}     for each layer with a selection
    drawn(weights, maps)     -> the weights a map draws       each layer's, a selection's layer's dense ones

Each layer's dense weights are computed on the input that layer had in the same forward pass (the sparse layers
before it as they are), by the layer once more with `hook_selected` returning every key (NSA: its selected
branch over every key, its other branches as they are). The heads' verdicts read the weights they used; only
the maps read these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.masks import Mask
from andrea.core.hook_points import HookPoint
from andrea.models.network import Network, attention_of


@dataclass(frozen=True)
class SelectionMap:
    dense: Tensor  # (B, H, T, S) the weights the heads would give every key the mask allows
    left_out: Tensor  # (B, H, T, S) True where the mask allows the key and the heads gave it no weight: the
    # selection left it out (NSA's: no branch reached it; its window's keys are used though its selection left them)


@torch.no_grad()
def selection_maps(net: Network, ids: Tensor) -> dict[int, SelectionMap]:
    """ids (B, T): each selection layer's dense weights and the keys it left out, on this pass's inputs."""
    layers = {i: layer for i, layer in enumerate(attention_of(net)) if layer is not None and layer.selection}
    if not layers:
        return {}
    inputs: dict[int, tuple[Tensor, dict[str, Any]]] = {}
    chosen: dict[int, Tensor] = {}
    removers = []
    for i, layer in layers.items():
        removers.append(layer.register_forward_pre_hook(_keep_input(inputs, i), with_kwargs=True).remove)
        removers.append(layer.points["hook_selected"].add(_keep_chosen(chosen, i)))
    try:
        used = net(ids, return_weights=True)[1]  # the weights the heads used: NSA's window reaches keys unchosen
    finally:
        for remove in removers:
            remove()
    maps = {}
    for i, layer in layers.items():
        x, kwargs = inputs[i]
        remove = layer.points["hook_selected"].add(_every_key)
        try:
            dense = layer(x, **(kwargs | {"return_weights": True, "cache": None}))[1]
        finally:
            remove()
        allowed = _allowed(dense, layer, kwargs.get("mask"))
        maps[i] = SelectionMap(dense, allowed & ~chosen[i].expand_as(dense) & (used[i] == 0))
    return maps


def drawn(weights: list[Tensor], maps: dict[int, SelectionMap]) -> list[Tensor]:
    """One weight tensor a layer, as the maps draw them: a layer with a selection's dense weights."""
    return [maps[i].dense if i in maps else w for i, w in enumerate(weights)]


def _allowed(weights: Tensor, layer: MultiHeadSelfAttention, mask: Mask | None) -> Tensor:
    """(B, H, T, S) what the layer's mask (and the batch's) lets each query see."""
    B, H, T, S = weights.shape
    own = layer.allowed(T).to(weights.device)  # (H or 1, T, T)
    allowed = own if mask is None else own & mask.dense(T, S, batch_size=B, num_heads=H, device=weights.device)
    return allowed.expand(B, H, T, S)


def _keep_input(inputs: dict[int, tuple[Tensor, dict[str, Any]]], i: int) -> Callable[..., None]:
    """A forward pre-hook keeping layer i's input: x first, the rest by name (as a network's layer calls it)."""

    def keep(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        inputs[i] = (args[0], dict(kwargs))

    return keep


def _keep_chosen(chosen: dict[int, Tensor], i: int) -> Callable[[Tensor, HookPoint], None]:
    def keep(value: Tensor, point: HookPoint) -> None:
        chosen[i] = value

    return keep


def _every_key(value: Tensor, point: HookPoint) -> Tensor:
    return torch.ones_like(value)
