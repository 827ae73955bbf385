"""The mask a model file names, checked: an expression of registered masks, or one registered mask with plain fields
(or, in files of an older andrea, a registered mask's class path). Nothing a file says is evaluated or imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from andrea.utils.rules import PLAIN


def mask_terms(mask: Any, refuse: Callable[[str, str], Exception]) -> int:
    """How many masks `mask` combines, refusing anything but registered masks with plain fields."""
    from andrea.attention import parse_mask

    if mask is None:
        return 0
    if isinstance(mask, str):
        try:
            parse_mask(mask)  # registered names, literal values, & and |: nothing is evaluated
        except ValueError as err:
            raise refuse(".attention.mask", f"cannot be read ({str(err).splitlines()[0]})") from None
        return mask.count("&") + mask.count("|") + 1
    if not isinstance(mask, dict):
        raise refuse(".attention.mask", f"is a {type(mask).__name__}, not a mask")
    _mask_name(mask, refuse)
    for key, value in mask.items():
        if key not in ("name", "_target_") and not isinstance(value, PLAIN):
            raise refuse(f".attention.mask.{key}", f"is a {type(value).__name__}, not a plain value")
    return 1


def _mask_name(mask: dict, refuse: Callable[[str, str], Exception]) -> str:
    """The registry name a mask config gives: `name` (conf/mask/ writes it), or, in files written before,
    the `_target_` class path of a registered mask."""
    from andrea.attention import mask_registry

    if "_target_" in mask or "name" not in mask:  # a class path: what a file of an older andrea holds
        names = mask_targets()
        if mask.get("_target_") not in names:
            registered = ", ".join(sorted(set(names.values())))
            problem = f"={mask.get('_target_')!r} is not a registered mask ({registered})"
            raise refuse(".attention.mask._target_", problem)
        return names[mask["_target_"]]
    if mask["name"] not in mask_registry.names():
        registered = ", ".join(mask_registry.names())
        raise refuse(".attention.mask.name", f"={mask['name']!r} is not a registered mask ({registered})")
    return str(mask["name"])


def mask_targets() -> dict[str, str]:
    """Every dotted class path that names a registered mask -> its registry name.

    A built-in mask answers to `andrea.attention.<Class>` (what conf/mask/ wrote before it named masks) and to its
    module path; a plugin's to its entry point's `module.Class`."""
    from andrea.attention import mask_registry

    paths = {}
    for name, spec in mask_registry.builtins.items():
        module, _, cls = spec.partition(":")
        paths.update({f"{module}.{cls}": name, f"andrea.attention.{cls}": name, f"andrea.attention.masks.{cls}": name})
    for name, entry_point in mask_registry._discover().items():
        module, _, cls = entry_point.value.partition(":")
        paths[f"{module}.{cls}"] = name
    return paths
