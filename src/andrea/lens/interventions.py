"""Interventions on heads: zero, scale or mean-ablate any heads of a network, and the
head-importance table (how much the loss rises when each head alone is ablated).

Heads are named `L<layer>H<head>` (L0H1: layer 0, head 1), as in the run summary. An
intervention acts on a head's output z (B, H, T, d) before W_O mixes the heads
(the hook point `blocks.<l>.attn.hook_z`, andrea.lens.cache), so the other heads and the residual stream are
untouched:

    zero   z_h = 0                            the head removed
    scale  z_h = s · z_h                       the head turned down (s < 1) or up
    mean   z_h = mean of z_h over the batches  the head's information removed, its average kept
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from andrea.core.hook_points import Hook, HookPoint
from andrea.lens.cache import add_hooks, hooks
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


def z_point(layer: int) -> str:
    """The hook point of layer `layer`'s head outputs z (B, T, H, d), what W_O reads."""
    return f"blocks.{layer}.attn.hook_z"


def _hook(scales: dict[int, float | None], means: Tensor | None) -> Hook:
    """z (B, T, H, d) -> z with each listed head scaled, or replaced by its mean (H, d) where s is None."""

    def hook(z: Tensor, point: HookPoint) -> Tensor:
        z = z.clone()
        for head, s in scales.items():
            if s is None:
                assert means is not None  # mean ablation asked for means
                z[:, :, head] = means[head].to(z.dtype)  # (B, T, d) from (d,)
            else:
                z[:, :, head] = z[:, :, head] * s
        return z

    return hook


def ablation_hooks(scales: dict[tuple[int, int], float | None], means: list[Tensor] | None = None) -> dict[str, Hook]:
    """One hook per layer named in `scales` ({(layer, head): s}): head (l, h) outputs s · z, or its mean
    (means[l][h]) where s is None."""
    layers: dict[int, dict[int, float | None]] = {}
    for (layer, head), s in scales.items():
        layers.setdefault(layer, {})[head] = s
    return {z_point(i): _hook(heads, None if means is None else means[i]) for i, heads in layers.items()}


def install(
    net: Network, scales: dict[tuple[int, int], float | None], means: list[Tensor] | None = None
) -> Callable[[], None]:
    """From now on, the heads of `scales` are scaled or mean-ablated in every forward; returns the call that
    undoes it."""
    return add_hooks(net, ablation_hooks(scales, means))


@contextmanager
def intervene(
    net: Network, scales: dict[tuple[int, int], float | None], means: list[Tensor] | None = None
) -> Iterator[None]:
    """`install` for the duration of the block."""
    with hooks(net, ablation_hooks(scales, means)):
        yield


@torch.no_grad()
def head_means(net: Network, batches: Iterable[Tensor]) -> list[Tensor]:
    """Each layer's mean head output (H, d) over every position of `batches` (input ids (B, T) each)."""
    sums: dict[str, Tensor] = {}
    count = 0

    def record(z: Tensor, point: HookPoint) -> None:
        total = z.double().sum(dim=(0, 1))  # (H, d)
        sums[point.name] = total if point.name not in sums else sums[point.name] + total

    with hooks(net, [(z_point(layer), record) for layer in range(len(net.mixers))]):
        for idx in batches:
            net(idx)
            count += idx.numel()
    return [(sums[z_point(layer)] / max(count, 1)).float() for layer in range(len(sums))]


@torch.no_grad()
def ablation_loss(
    net: Network,
    batches: list[tuple[Tensor, Tensor]],
    heads: Iterable[tuple[int, int]],
    loss: Callable[[Tensor, Tensor], Tensor],
    means: list[Tensor] | None = None,
) -> dict[str, float]:
    """The loss over `batches` with every head of `heads` ablated at once (zero, or mean with `means`), beside
    the intact network's: {"base_loss", "ablated_loss", "rise"}. Heads that back each other up show here."""

    def mean_loss() -> float:
        return sum(float(loss(net(idx)[0], labels)) for idx, labels in batches) / len(batches)

    base = mean_loss()
    with intervene(net, dict.fromkeys(heads, None if means is not None else 0.0), means):
        ablated = mean_loss()
    return {"base_loss": base, "ablated_loss": ablated, "rise": ablated - base}


@torch.no_grad()
def head_importance(
    net: Network, batches: list[tuple[Tensor, Tensor]], loss: Callable[[Tensor, Tensor], Tensor]
) -> list[dict]:
    """For every head: the loss over `batches` ((input ids, labels) pairs) with that head alone zero- and
    mean-ablated, and with every other head of its layer zero-ablated (leave-one-in: what it does alone), each
    beside the intact network's loss. Sorted by the zero-ablation rise. Heads that back each other up rise
    little alone; `layer_importance` and `ablation_loss` show what they carry together."""

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
            with intervene(net, {(layer, other): 0.0 for other in range(n_head) if other != head}):
                alone = mean_loss()
            rows.append({"head": head_name(layer, head), "zero_loss": zero, "zero_rise": zero - base,
                         "mean_loss": mean, "mean_rise": mean - base, "alone_loss": alone,
                         "alone_rise": alone - base, "base_loss": base})  # fmt: skip
    return sorted(rows, key=lambda row: -row["zero_rise"])


@torch.no_grad()
def layer_importance(
    net: Network, batches: list[tuple[Tensor, Tensor]], loss: Callable[[Tensor, Tensor], Tensor]
) -> list[dict]:
    """For every layer: the loss with all its heads zero-ablated at once, and the rise."""
    n_layer, n_head = heads_shape(net)
    rows = []
    for layer in range(n_layer):
        found = ablation_loss(net, batches, [(layer, head) for head in range(n_head)], loss)
        rows.append({"layer": layer, "loss": found["ablated_loss"], "rise": found["rise"]})
    return rows


def importance_table(rows: list[dict], layers: list[dict] | None = None) -> str:
    """The rows as a markdown table, most important head first; then, given, the whole-layer ablations."""
    lines = [
        f"validation loss with every head: {rows[0]['base_loss']:.4f}" if rows else "no attention heads",
        "",
        "| head | zero-ablated loss | rise | mean-ablated loss | rise | alone in its layer: loss | rise |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['head']} | {r['zero_loss']:.4f} | {r['zero_rise']:+.4f} | {r['mean_loss']:.4f} | {r['mean_rise']:+.4f} "
        f"| {r['alone_loss']:.4f} | {r['alone_rise']:+.4f} |"
        for r in rows
    ]
    if layers:
        lines += ["", "| layer | every head zero-ablated: loss | rise |", "|---|---|---|"]
        lines += [f"| {r['layer']} | {r['loss']:.4f} | {r['rise']:+.4f} |" for r in layers]
    return "\n".join(lines) + "\n"
