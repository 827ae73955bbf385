"""Settings typed once, by the constructor that takes them: each keyword's annotation gives its rule
(andrea.utils.rules), so a value of the wrong type or range is refused by the same words wherever the settings
are read (a config, a model file, a checkpoint's record), before anything is built.

    bool           true or false (not 2, not "maybe")
    int, float     the owner's rule for the type (`by_type`: a mixer's integers are positive, a task's are >= 0)
    X | None       X, or null
    anything else  the owner's own (its `own` table, or the constructor's check when it runs)

A constructor that passes `**kwargs` on to its base class's has the base's settings too (the class's MRO is
read until a constructor without `**kwargs`).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

from andrea.utils.rules import Rule, optional


def signature_rules(
    cls: type, by_type: Mapping[Any, Rule], own: Mapping[str, Rule] | None = None, skip: tuple[str, ...] = ()
) -> dict[str, Rule]:
    """Each setting of `cls`'s constructor (those in `skip` aside) with its rule: `own`'s, else its annotation's."""
    rules: dict[str, Rule] = {}
    for parameter in _settings(cls):
        if parameter.name in skip or parameter.name in rules:
            continue
        rule = (own or {}).get(parameter.name) or _typed(parameter.annotation, by_type)
        if rule is not None:
            rules[parameter.name] = rule
    return rules


def setting_names(cls: type) -> list[str]:
    """Every keyword `cls`'s constructor takes, its bases' through **kwargs included, in order."""
    return list(dict.fromkeys(parameter.name for parameter in _settings(cls)))


def _settings(cls: type) -> list[inspect.Parameter]:
    """The keywords of `cls`'s constructor and, while one passes **kwargs on, of its bases' (first wins)."""
    found: list[inspect.Parameter] = []
    for owner in cls.__mro__:
        if "__init__" not in vars(owner) or owner is object:
            continue
        try:
            parameters = inspect.signature(vars(owner)["__init__"], eval_str=True).parameters
        except (NameError, TypeError, SyntaxError):  # annotations its module cannot resolve: left to the owner
            parameters = inspect.signature(vars(owner)["__init__"]).parameters
        kinds = {p.kind for p in parameters.values()}
        found += [
            p for name, p in parameters.items() if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if inspect.Parameter.VAR_KEYWORD not in kinds:
            break
    return found


def _typed(hint: Any, by_type: Mapping[Any, Rule]) -> Rule | None:
    """The rule of an annotation: one of `by_type`'s types, or one of them | None."""
    if hint in by_type:
        return by_type[hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(hint) if member is not type(None)]
        if len(members) == 1 and len(typing.get_args(hint)) == 2 and members[0] in by_type:
            return optional(by_type[members[0]])
    return None
