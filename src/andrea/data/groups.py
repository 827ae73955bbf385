"""The permutation groups of the word problem (andrea.data.state_tracking), in plain Python so that a config's
resolver (`${andrea.group_order:${.group}}`) reads a group's order without loading a data module:

    S3   the 6 permutations of 3 points (solvable)
    A5   the 60 even permutations of 5 points (the smallest non-solvable group)
    S5   the 120 permutations of 5 points

Elements are listed in lexicographic order (an element's token is its place in the list), and products are
composed as functions, (a b)(i) = a(b(i)).
"""

from __future__ import annotations

import itertools
from functools import cache

GROUPS = {"S3": (3, False), "A5": (5, True), "S5": (5, False)}  # name: (points, even permutations only)


def group_order(group: str) -> int:
    """The number of elements of a group GROUPS names, or a one-line refusal naming data.group."""
    if group not in GROUPS:
        raise ValueError(f"data.group={group!r} is not one of {', '.join(GROUPS)}")
    return len(elements(group))


@cache
def elements(group: str) -> tuple[tuple[int, ...], ...]:
    """The group's permutations of 0..n-1 in lexicographic order (A5: the even ones)."""
    points, even = GROUPS[group]
    return tuple(p for p in itertools.permutations(range(points)) if not even or _even(p))


@cache
def products(group: str) -> tuple[tuple[int, ...], ...]:
    """The group's multiplication table: row a, column b holds the index of a b, (a b)(i) = a(b(i))."""
    members = elements(group)
    index = {p: i for i, p in enumerate(members)}
    return tuple(tuple(index[tuple(a[i] for i in b)] for b in members) for a in members)


def _even(p: tuple[int, ...]) -> bool:
    inversions = sum(p[i] > p[j] for i in range(len(p)) for j in range(i + 1, len(p)))
    return inversions % 2 == 0
