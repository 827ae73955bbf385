"""Interventions on heads: zero, scale or mean-ablate any heads of a network, and the
head-importance table (how much the loss rises when each head alone is ablated).

Heads are named `L<layer>H<head>` (L0H1: layer 0, head 1), as in the run summary. An
intervention acts on a head's output z (B, H, T, d) before W_O mixes the heads
(MultiHeadSelfAttention.hook_z), so the other heads and the residual stream are untouched:

    zero   z_h = 0                            the head removed
    scale  z_h = s · z_h                       the head turned down (s < 1) or up
    mean   z_h = mean of z_h over the batches  the head's information removed, its average kept
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from andrea.lens.heads import head_name, parse_head
from andrea.models.network import Network, heads_shape


def parse_heads(names: Iterable[str], n_layer: int, n_head: int, key: str = "ablate") -> list[tuple[int, int]]:
    """["L0H1", "L1H3"] -> [(0, 1), (1, 3)], each checked against the network's layers and heads."""
    heads = []
    for name in names:
        try:
            layer, head = parse_head(name)
        except ValueError as err:
            raise ValueError(f"{key}: {err}") from None
        if layer >= n_layer or head >= n_head:
            raise ValueError(f"{key}: {name} is not in this network (layers 0..{n_layer - 1}, heads 0..{n_head - 1})")
        heads.append((layer, head))
    return heads


def _per_layer(scales: dict[tuple[int, int], float | None]) -> dict[int, dict[int, float | None]]:
    layers: dict[int, dict[int, float | None]] = {}
    for (layer, head), s in scales.items():
        layers.setdefault(layer, {})[head] = s
    return layers


def _hook(scales: dict[int, float | None], means: Tensor | None) -> Callable[[Tensor], Tensor]:
    """z (B, H, T, d) -> z with each listed head scaled, or replaced by its mean (H, d) where s is None."""

    def hook(z: Tensor) -> Tensor:
        z = z.clone()
        for head, s in scales.items():
            if s is None:
                assert means is not None  # mean ablation asked for means
                z[:, head] = means[head].to(z.dtype)  # (T, d) broadcast from (d,)
            else:
                z[:, head] = z[:, head] * s
        return z

    return hook


def install(
    net: Network, scales: dict[tuple[int, int], float | None], means: list[Tensor] | None = None
) -> list[Callable[[Tensor], Tensor] | None]:
    """From now on, head (l, h) outputs s · z (s = scales[(l, h)]), or its mean (means[l][h]) where s is
    None; returns every layer's previous hook_z, for `restore`."""
    layers = net.attention
    previous = [layer.hook_z for layer in layers]
    for number, per_head in _per_layer(scales).items():
        layers[number].hook_z = _hook(per_head, means[number] if means is not None else None)
    return previous


def restore(net: Network, hooks: list[Callable[[Tensor], Tensor] | None]) -> None:
    for attention, hook in zip(net.attention, hooks, strict=True):
        attention.hook_z = hook


@contextmanager
def intervene(
    net: Network, scales: dict[tuple[int, int], float | None], means: list[Tensor] | None = None
) -> Iterator[None]:
    """`install` for the duration of the block."""
    previous = install(net, scales, means)
    try:
        yield
    finally:
        restore(net, previous)


@torch.no_grad()
def head_means(net: Network, batches: Iterable[Tensor]) -> list[Tensor]:
    """Each layer's mean head output (H, d) over every position of `batches` (input ids (B, T) each)."""
    sums: list[Tensor | None] = [None] * len(net.attention)
    count = 0

    def recorder(layer: int) -> Callable[[Tensor], Tensor]:
        def hook(z: Tensor) -> Tensor:
            total = z.double().sum(dim=(0, 2))  # (H, d)
            sums[layer] = total if sums[layer] is None else sums[layer] + total  # type: ignore[operator]
            return z

        return hook

    previous = [layer.hook_z for layer in net.attention]
    try:
        for i, layer in enumerate(net.attention):
            layer.hook_z = recorder(i)
        for idx in batches:
            net(idx)
            count += idx.numel()
    finally:
        restore(net, previous)
    return [(s / max(count, 1)).float() for s in sums if s is not None]


@torch.no_grad()
def head_importance(
    net: Network, batches: list[tuple[Tensor, Tensor]], loss: Callable[[Tensor, Tensor], Tensor]
) -> list[dict]:
    """For every head: the loss over `batches` ((input ids, labels) pairs) with that head alone
    zero- and mean-ablated, and the rise over the intact network's. Sorted by the zero-ablation rise."""

    def mean_loss() -> float:
        return sum(float(loss(net(idx)[0], labels)) for idx, labels in batches) / len(batches)

    base = mean_loss()
    means = head_means(net, (idx for idx, _ in batches))
    rows = []
    n_layer, n_head = heads_shape(net)
    for layer in range(n_layer):
        for head in range(n_head):
            with intervene(net, {(layer, head): 0.0}):
                zero = mean_loss()
            with intervene(net, {(layer, head): None}, means):
                mean = mean_loss()
            rows.append({"head": head_name(layer, head), "zero_loss": zero, "zero_rise": zero - base,
                         "mean_loss": mean, "mean_rise": mean - base, "base_loss": base})  # fmt: skip
    return sorted(rows, key=lambda row: -row["zero_rise"])


def importance_table(rows: list[dict]) -> str:
    """The rows as a markdown table, most important head first."""
    lines = [
        f"validation loss with every head: {rows[0]['base_loss']:.4f}" if rows else "no attention heads",
        "",
        "| head | zero-ablated loss | rise | mean-ablated loss | rise |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['head']} | {r['zero_loss']:.4f} | {r['zero_rise']:+.4f} | {r['mean_loss']:.4f} | {r['mean_rise']:+.4f} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"
