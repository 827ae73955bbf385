"""How andrea names a head, everywhere it writes or reads one (the dashboard's tags, verdicts,
interventions, the explorer): "L<layer>H<head>", both counted from 0; and a role's short name."""

from __future__ import annotations

import re

HEAD = re.compile(r"L(\d+)H(\d+)")
SHORT_NAMES = {
    "previous_token": "prev",
    "induction": "ind",
    "first_token": "first",
    "entropy": "entropy",
}  # roles, in tables


def head_name(layer: int, head: int) -> str:
    """(1, 3) -> "L1H3"."""
    return f"L{layer}H{head}"


def parse_head(name: str) -> tuple[int, int]:
    """ "L1H3" -> (1, 3); ValueError for anything else."""
    found = HEAD.fullmatch(str(name).strip())
    if found is None:
        raise ValueError(f"{name!r} is not a head; name heads L<layer>H<head>, e.g. L0H1")
    return int(found[1]), int(found[2])
