"""Read and edit any activation of a network by its name: `run_with_cache` and `hooks`.

Every andrea network (ToyModel, GPT, a GPT-2 read from a Hugging Face folder) lists its hook points in
`net.hook_points()`, named as TransformerLens names the same activation (docs/lens.md has the table):

    logits, cache = run_with_cache(net, ids)                      # every point
    logits, cache = run_with_cache(net, ids, names=["blocks.1.attn.hook_pattern"])
    cache["blocks.1.attn.hook_pattern"]                            # (B, H, T, T)

    def zero_head_2(z, point):                                     # z (B, T, H, d) at blocks.0.attn.hook_z
        z = z.clone(); z[:, :, 2] = 0
        return z                                                   # what the forward goes on with

    with hooks(net, {"blocks.0.attn.hook_z": zero_head_2}):
        logits, _ = net(ids)

A hook is fn(activation, point) -> a tensor to go on with, or None to leave it; any number may sit on one
point (in the order given, after those already there), and every one is removed when the block ends,
whatever happened inside it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor

from andrea.core.hook_points import Hook, HookPoint
from andrea.models.network import Network

Names = str | Sequence[str] | Callable[[str], bool] | None
Hooks = Mapping[str, Hook | Sequence[Hook]] | Iterable[tuple[str, Hook]]


class ActivationCache(dict[str, Tensor]):
    """Activations by hook-point name; a name it does not hold is refused with the closest it does."""

    def __missing__(self, name: str) -> Tensor:
        raise KeyError(unknown(name, list(self), "this cache"))


def unknown(name: str, known: list[str], where: str) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{name!r} is not a hook point of {where}{hint}; docs/lens.md lists them, net.hook_points() names them"


def point(net: Network, name: str) -> HookPoint:
    """The network's hook point called `name`, or a one-line refusal naming the closest."""
    points = net.hook_points()
    if name not in points:
        raise KeyError(unknown(name, list(points), "this network"))
    return points[name]


def _pairs(fns: Hooks) -> list[tuple[str, Hook]]:
    if not isinstance(fns, Mapping):
        return list(fns)
    pairs: list[tuple[str, Hook]] = []
    for name, hook in fns.items():
        pairs += [(name, h) for h in hook] if isinstance(hook, Sequence) else [(name, hook)]
    return pairs


def add_hooks(net: Network, fns: Hooks) -> Callable[[], None]:
    """Attach hooks until the returned call detaches them all (for hooks that outlive a block, such as a
    training run's ablations). Every name is checked before the first hook is attached."""
    pairs = _pairs(fns)
    points = [point(net, name) for name, _ in pairs]
    removers = [p.add(fn) for p, (_, fn) in zip(points, pairs, strict=True)]

    def remove() -> None:
        for detach in reversed(removers):
            detach()

    return remove


@contextmanager
def hooks(net: Network, fns: Hooks) -> Iterator[None]:
    """`fns` ({name: hook or [hooks]}, or (name, hook) pairs) attached for the duration of the block."""
    remove = add_hooks(net, fns)
    try:
        yield
    finally:
        remove()


def selected(net: Network, names: Names) -> list[str]:
    """The point names `names` picks: all (None), one, a list (each checked), or those a predicate accepts."""
    every = list(net.hook_points())
    if names is None:
        return every
    if callable(names):
        return [name for name in every if names(name)]
    chosen = [names] if isinstance(names, str) else list(names)
    for name in chosen:
        point(net, name)  # refused here when it is no point of this network
    return chosen


def run_with_cache(
    net: Network, ids: Tensor, names: Names = None, *, grad: bool = False
) -> tuple[Tensor, ActivationCache]:
    """ids (B, T) -> logits (B, T, V) and the activations `names` picks (all by default), detached, as the
    forward met them (after any hook already attached). Without `grad` the forward runs under no_grad."""
    cache = ActivationCache()

    def keep(x: Tensor, p: HookPoint) -> None:
        cache[p.name] = x.detach()

    with hooks(net, [(name, keep) for name in selected(net, names)]), torch.set_grad_enabled(grad):
        logits, _ = net(ids)
    return logits, cache
