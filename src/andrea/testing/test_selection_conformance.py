"""The selections' cells of the conformance kit (andrea.testing.selection_checks): every registered selection of
keys, built-in or plugin, against dense attention over the keys it chose, through a cache, and keeping every key.
Each cell joins the selection parity matrix (andrea.testing.report): a row per selection and mask, a column per
head configuration."""

from __future__ import annotations

import pytest

from andrea.testing import selection_checks
from andrea.testing.report import SELECTIONS, recorder
from andrea.testing.test_conformance import Record

NAMES, MASKS, HEADS = selection_checks.selection_names(), list(selection_checks.MASKS), list(selection_checks.HEADS)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("selection_name", NAMES)
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_selection_parity(
    selection_name: str, mask_name: str, heads: str, direction: str, record_property: Record
) -> None:
    record = recorder(record_property, SELECTIONS, (selection_name, mask_name, heads, direction))
    record(selection_checks.parity(selection_name, mask_name, heads, backward=direction == "backward"))


CHECKS = {"decode": selection_checks.decode, "keeping every key": selection_checks.covering}
# a window shows a block in part, which MoBA never takes: no dense twin to keep every key there
CHECKED = [(check, name, mask, heads) for check in CHECKS for name in NAMES for mask in MASKS for heads in HEADS
           if check == "decode" or mask != "window"]  # fmt: skip


@pytest.mark.parametrize(("check", "selection_name", "mask_name", "heads"), CHECKED)
def test_selection_check(check: str, selection_name: str, mask_name: str, heads: str, record_property: Record) -> None:
    record = recorder(record_property, SELECTIONS, (selection_name, mask_name, heads, check))
    record(CHECKS[check](selection_name, mask_name, heads))
