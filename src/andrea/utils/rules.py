"""Rules for a setting's value: a test and what it must be in words (`integer(1)` reads "a positive
integer"). The config checks (andrea.train.keys), the model-file schema and the CLIs' settings share them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

Rule = tuple[Callable[[Any], bool], str]  # a test of a value, and what it must be in words


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


POSITIVE = integer(1)
