"""How andrea names a head, everywhere it writes or reads one (the dashboard's tags, verdicts,
interventions, the explorer): "L<layer>H<head>", both counted from 0; a role's short name; and a head-role
score's key, (role, layer, head), named as a metric ("heads/<role>/L<layer>H<head>") only where it leaves for a
logger or a file."""

from __future__ import annotations

import re

HEAD = re.compile(r"L(\d+)H(\d+)")
SHORT_NAMES = {
    "previous_token": "prev",
    "induction": "ind",
    "first_token": "first",
    "entropy": "entropy",
}  # roles, in tables


RoleHead = tuple[str, int, int]  # a head-role score's key: (role, layer, head)


def metric_name(key: RoleHead) -> str:
    """("entropy", 0, 1) -> "heads/entropy/L0H1", the score's name on a dashboard and in result.json."""
    role, layer, head = key
    return f"heads/{role}/{head_name(layer, head)}"


def head_name(layer: int, head: int) -> str:
    """(1, 3) -> "L1H3"."""
    return f"L{layer}H{head}"


def parse_head(name: str) -> tuple[int, int]:
    """ "L1H3" -> (1, 3); ValueError for anything else."""
    found = HEAD.fullmatch(str(name).strip())
    if found is None:
        raise ValueError(f"{name!r} is not a head; name heads L<layer>H<head>, e.g. L0H1")
    return int(found[1]), int(found[2])
