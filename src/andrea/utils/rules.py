"""Rules for a setting's value: a test and what it must be in words (`integer(1)` reads "a positive
integer").

The part that owns settings declares them once, as a table of rules (andrea.models.settings.NET,
andrea.data.settings.DATA, andrea.train.maps_settings.SETTINGS, each CLI's SETTINGS), and checks itself with
`enforce`; the config checks (andrea.train.keys.RANGES) and the model-file schema read the same tables
through `first_problem`, so a rule and its words are written once."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Rule = tuple[Callable[[Any], bool], str]  # a test of a value, and what it must be in words


class SettingError(ValueError):
    """A setting refused: `key` (as its owner names it, e.g. "model.net.layout") and `problem`, which reads on
    from the key ("=3 must be ..." or "has 3 names, ..."). A caller that shows the key otherwise (a model
    file's prefix) reads the two parts, never the message."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}{'' if problem.startswith('=') else ' '}{problem}")
        self.key, self.problem = key, problem


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(low: int, high: int | None = None, also: tuple[int, ...] = ()) -> Rule:
    def test(v: Any) -> bool:
        return _integer(v) and (v in also or v >= low and (high is None or v <= high))

    words = (
        "a positive integer"
        if low == 1 and high is None
        else f"an integer >= {low}"
        if high is None
        else f"an integer in [{low}, {high}]"
    )
    return test, words + "".join(f", or {a}" for a in also)


def number(low: float, high: float | None = None, low_open: bool = False, high_open: bool = False) -> Rule:
    def test(v: Any) -> bool:
        return (
            _number(v)
            and (v > low if low_open else v >= low)
            and (high is None or (v < high if high_open else v <= high))
        )

    words = f"a finite number {'>' if low_open else '>='} {low:g}" + (
        "" if high is None else f" and {'<' if high_open else '<='} {high:g}"
    )
    return test, words


def optional(rule: Rule) -> Rule:
    test, words = rule
    return (lambda v: v is None or test(v)), words + ", or null"


def either(words: str, *rules: Rule) -> Rule:
    return (lambda v: any(test(v) for test, _ in rules)), words


def duration() -> Rule:
    """What max_time takes from a config: "DD:HH:MM:SS" (Lightning takes a mapping too, but not the
    DictConfig Hydra would hand it), at most 99999 days (more overflows Python's timedelta)."""
    pattern = re.compile(r"^\d{1,5}:\d{1,2}:\d{1,2}:\d{1,2}$")
    return (
        lambda v: v is None or isinstance(v, str) and bool(pattern.match(v))
    ), 'DD:HH:MM:SS, e.g. "00:01:30:00", or null'


def one_of(*choices: Any) -> Rule:
    words = "one of " + ", ".join(map(str, choices))
    return (lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in choices), words


def pair(rule: Rule) -> Rule:
    """Two values, each kept by `rule`, as a list in a config ([0.9, 0.95])."""
    test, words = rule
    plural = words.removeprefix("a ").replace("number", "numbers", 1)
    return (lambda v: _sequence(v) and len(v) == 2 and all(test(x) for x in v)), f"two {plural}, as [a, b]"


def _sequence(value: Any) -> bool:
    from collections.abc import Sequence

    return isinstance(value, Sequence) and not isinstance(value, str)


POSITIVE = integer(1)
FINITE: Rule = (_number, "a finite number")
PLAIN = (str, int, float, bool, type(None))  # the values a file's settings may hold: no containers, no objects
BOOLEAN: Rule = ((lambda v: isinstance(v, bool)), "true or false")


def problem_of(rules: Mapping[str, Rule], values: Mapping[str, Any], prefix: str = "") -> SettingError | None:
    """The first of `values` that breaks its rule, as SettingError("<prefix><key>", "=<value> must be
    <words>") (None: all fine). A key `values` lacks is not checked: its owner's default applies."""
    for key, (test, words) in rules.items():
        if key in values and not test(values[key]):
            return SettingError(f"{prefix}{key}", f"={values[key]!r} must be {words}")
    return None


def first_problem(rules: Mapping[str, Rule], values: Mapping[str, Any], prefix: str = "") -> str | None:
    """`problem_of`'s line, or None."""
    problem = problem_of(rules, values, prefix)
    return None if problem is None else str(problem)


def enforce(rules: Mapping[str, Rule], values: Mapping[str, Any], prefix: str = "") -> None:
    """Raise `problem_of`'s SettingError, if any: what a constructor calls on its own arguments."""
    problem = problem_of(rules, values, prefix)
    if problem:
        raise problem


def prefixed(prefix: str, rules: Mapping[str, Rule], leave: tuple[str, ...] = ()) -> dict[str, Rule]:
    """`rules` under the config keys `<prefix><key>` (those in `leave` aside)."""
    return {prefix + key: rule for key, rule in rules.items() if key not in leave}


def read_list(value: Any, what: str) -> list:
    """A list read from a file (a checkpoint's record), or ValueError "<what> is a dict, not a list"."""
    if not isinstance(value, list):
        raise ValueError(f"{what} is {type(value).__name__}, not a list")
    return value


def read_value(value: Any, rule: Rule, what: str) -> Any:
    """A plain value read from a file, checked by `rule`, or ValueError "<what> holds <value>, not <words>"."""
    test, words = rule
    if not test(value):
        raise ValueError(f"{what} holds {str(value)[:60]}, not {words}")
    return value


def mapping_problem(
    value: object, rules: Mapping[str, Rule], required: Sequence[str], owner: str, example: str, needs: str
) -> str | None:
    """What is wrong with a setting that is a mapping of settings of its own (position.yarn: {factor: 32, ...}):
    "=<value> ..." of the whole, ".<key> ..." of one of its keys, or None. Each key one of `rules` and kept by its
    rule, the `required` ones given (`needs`: what the refusal of a missing one adds, e.g. "; give scale, floor")."""
    if not isinstance(value, Mapping):
        return f"={value!r} must be a mapping, e.g. {example}"
    unknown = sorted(str(key) for key in value if key not in rules)
    if unknown:
        return f".{unknown[0]} is not a setting of {owner}; give {', '.join(rules)}"
    missing = [key for key in required if key not in value]
    if missing:
        return f".{missing[0]} is missing{needs}"
    for key, item in value.items():
        test, words = rules[str(key)]
        if not test(item):
            return f".{key}={item!r} must be {words}"
    return None
