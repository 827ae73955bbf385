"""A token mixer's settings, typed once and checked before anything is built.

The description is the mixer's own constructor (andrea.utils.typed_settings): every keyword after what the
network gives each mixer (andrea.mixers.layers.PLACE) is a setting, and its annotation types it:

    bool              true or false (not 2, not "maybe")
    int               a positive integer (a count or a size: heads, chunk, state rows, expansion)
    float             a positive finite number (a width ratio)
    X | None          X, or null

A mixer narrows a setting in its class's `setting_rules` (a setting with named values, such as
`form: one_of("parallel", "chunked", "recurrent")`, or another range). A setting without an annotation that
says one of these is the mixer's own to check (a plugin's constructor, when it builds). The config checks, a
model file's schema and the network's build all read this one description (andrea.mixers.layer_spec),
so `mixer.chunk=1.5` is refused by the same words everywhere, before any work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from andrea.utils.rules import BOOLEAN, POSITIVE, Rule, SettingError, number, problem_of
from andrea.utils.typed_settings import signature_rules

BY_TYPE: dict[Any, Rule] = {bool: BOOLEAN, int: POSITIVE, float: number(0.0, low_open=True)}


def setting_rules(cls: type, place: tuple[str, ...]) -> dict[str, Rule]:
    """Each setting of the mixer class `cls` with the rule its annotation (or its own `setting_rules`) gives."""
    return signature_rules(cls, BY_TYPE, getattr(cls, "setting_rules", {}), skip=place)


def check_settings(
    name: str, cls: type, settings: Mapping[str, Any], place: tuple[str, ...], where: str = "mixer."
) -> None:
    """Refuse the first of `settings` that its rule does not keep: SettingError("<where><key>", "=<value> must be
    <words> (a setting of mixer <name>)"); `where`: the settings' key (mixer., model.net.kinds.<kind>.)."""
    problem = problem_of(setting_rules(cls, place), settings, where)
    if problem is not None:
        raise SettingError(problem.key, f"{problem.problem} (a setting of mixer {name})")
