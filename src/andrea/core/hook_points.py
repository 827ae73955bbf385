"""Named points on a network's activations, where the lens (andrea.lens.cache) reads and edits them.

A HookPoint sits on one activation of a forward pass: `x = point(x)` hands x to each function attached
to the point, in the order they were attached; a function returns the activation to go on with, or None
to leave it as it is. With nothing attached the call returns x at once, so a network pays nothing for
its points. Names follow TransformerLens where the concept is the same (`blocks.0.attn.hook_pattern`);
each network lists its own points, with their names, in `hook_points()` (docs/lens.md has the table).

    fn(activation: Tensor, point: HookPoint) -> Tensor | None
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from torch import Tensor

Hook = Callable[[Tensor, "HookPoint"], "Tensor | None"]


class HookPoint:
    """One named activation. `name` is its full name in the network (set by the network's `hook_points()`)."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.fns: list[Hook] = []

    def __call__(self, x: Tensor) -> Tensor:
        for fn in self.fns:
            out = fn(x, self)
            if out is not None:
                x = out
        return x

    def heads(self, x: Tensor) -> Tensor:
        """An activation kept as (B, H, T, d) inside attention, seen by the hooks as TransformerLens lays it
        out, (B, T, H, d); what they return goes back to (B, H, T, d)."""
        if not self.fns:
            return x
        return self(x.transpose(1, 2)).transpose(1, 2)

    def add(self, fn: Hook) -> Callable[[], None]:
        """Attach fn after the functions already here; returns the call that detaches it again."""
        self.fns.append(fn)

        def remove() -> None:
            if fn in self.fns:
                self.fns.remove(fn)

        return remove

    def __repr__(self) -> str:
        return f"HookPoint({self.name!r}, {len(self.fns)} attached)"

    def __deepcopy__(self, memo: dict) -> HookPoint:
        copy = HookPoint(self.name)  # a copied network edits its activations as this one does (an ablation)
        copy.fns = list(self.fns)
        return copy


class Points(dict[str, HookPoint]):
    """A part's hook points by name, each name written once: `Points(NAMES)["hook_q"](x)`."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__((name, HookPoint(name)) for name in names)


def prefixed(points: dict[str, HookPoint], prefix: str) -> dict[str, HookPoint]:
    """A part's points under its place in the network (`blocks.0.` + `attn.hook_q`), names set to match."""
    named = {prefix + name: point for name, point in points.items()}
    for name, point in named.items():
        point.name = name
    return named
