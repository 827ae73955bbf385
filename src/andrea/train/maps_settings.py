"""The attention-maps callback's settings (callbacks.attention_maps.*), declared once: AttentionMaps checks
its arguments with them, and the config checks (andrea.train.keys) read them before anything is built,
without importing Lightning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from andrea.lens.viz import SCALES
from andrea.utils.rules import POSITIVE, Rule, first_problem, integer, one_of, optional

SCHEDULES = ("log", "linear")
PREFIX = "callbacks.attention_maps."
SETTINGS: dict[str, Rule] = {
    "every_n_steps": POSITIVE,
    "probe_rows": POSITIVE,
    "row": integer(0),
    "max_pending": POSITIVE,
    "schedule": one_of(*SCHEDULES),
    "window": optional(integer(2)),
    "scale": one_of(*SCALES),
}


def check_settings(settings: Mapping[str, Any]) -> str | None:
    """The first setting out of its rule, or a row beyond the probe rows, as one line (None: all fine):
    what the callback raises, and what the config checks refuse before anything is built."""
    problem = first_problem(SETTINGS, settings, PREFIX)
    row, rows = settings.get("row", 0), settings.get("probe_rows", 8)
    if problem is None and row >= rows:
        problem = f"{PREFIX}row={row} must be below {PREFIX}probe_rows={rows}; "
        problem += "pick a row in range, or draw more probe rows"
    return problem
