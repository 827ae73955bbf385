"""A synthetic task's settings, typed by its constructors (andrea.utils.typed_settings) and checked before the
constructor's body reads them: its integers are counts, sizes and seeds (>= 0; andrea.data.settings.DATA's sizes
positive), its floats finite; each task's constructor then checks the ranges between them. And the evaluation
sets a task names, as plain values."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from andrea.data.settings import DATA
from andrea.utils.rules import BOOLEAN, FINITE, Rule, enforce, integer
from andrea.utils.typed_settings import signature_rules

if TYPE_CHECKING:
    from andrea.data.tasks import SyntheticTaskDataModule

TYPED: dict[Any, Rule] = {bool: BOOLEAN, int: integer(0), float: FINITE}


def task_rules(cls: type) -> dict[str, Rule]:
    """Each setting's rule: DATA's for the sizes, else its annotation's in the task's constructors."""
    return signature_rules(cls, TYPED, DATA)


def typed_constructor(init: Callable[..., None]) -> Callable[..., None]:
    """A task's constructor that first checks its own settings by their types (the one description every way a
    task is built shares: a config, a checkpoint's record, a run's recorded config, an evaluation set), so that
    `true` is no number of pairs and `abc` no seed; the outermost constructor, once every setting is in place,
    then checks the evaluation sets."""
    own = set(inspect.signature(init).parameters) - {"self"}

    @functools.wraps(init)
    def checked(self: SyntheticTaskDataModule, *args: Any, **settings: Any) -> None:
        rules = type(self).setting_rules()
        enforce({key: rule for key, rule in rules.items() if key in own}, settings, "data.")
        init(self, *args, **settings)
        if type(self).__init__ is checked:
            self.check_eval_sets()

    return checked


def eval_sets_of(sets: Mapping[str, Mapping[str, Any]] | None, setting: str = "eval_sets") -> dict[str, dict[str, Any]]:
    """{name: settings} as plain values, of data.eval_sets or data.train_mix (the parts of a training mixture); a
    name is letters, digits and underscores (it names logged metrics)."""
    found: dict[str, dict[str, Any]] = {}
    for name, changes in (sets or {}).items():
        if not re.fullmatch(r"\w+", str(name)) or str(name) == "val" or not isinstance(changes, Mapping):
            raise ValueError(
                f"data.{setting}.{name}: give each set a name of letters, digits and underscores (not val) and the "
                f"settings that differ, e.g. data.{setting}={{pairs_8: {{num_kv_pairs: 8}}}}"
            )
        found[str(name)] = {str(key): value for key, value in changes.items()}
    return found
