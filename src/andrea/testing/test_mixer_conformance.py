"""The token mixers' cells of the conformance kit (andrea.testing.mixer_checks): every registered mixer but
attention, built-in or plugin, with its defaults and with each of its `kit_settings`, in every form it declares,
against the recurrence it declares. Each cell joins the token mixer parity matrix (andrea.testing.report): a row per
mixer (or setting) and mask, a column per form."""

from __future__ import annotations

from itertools import product

import pytest

from andrea.mixers.layers import broken_mixers
from andrea.testing import cost, mixer_checks
from andrea.testing.cost import cells
from andrea.testing.report import MIXERS, recorder
from andrea.testing.test_conformance import Record

# as the attention matrix's: bfloat16 forward only (a whole layer's parameter gradients summed over the batch
# in bfloat16 are not the float64 ones to 3e-2)
VARIANTS = ["float32-forward", "float32-backward", "bfloat16-forward"]
ROWS = [(row, form) for row in mixer_checks.mixer_rows() for form in mixer_checks.forms_of(row)]
PARITY = ("mixer_name", "form", "mask_name", "variant")
DECODE = ("mixer_name", "form", "mask_name", "start")


def _cells(last: list[str]) -> list[tuple[str, ...]]:
    return [(*row, mask, value) for row, mask, value in product(ROWS, mixer_checks.MASKS, last)]


@pytest.mark.parametrize(PARITY, cells(PARITY, _cells(VARIANTS), cost.mixer_parity))
def test_mixer_parity(mixer_name: str, form: str, mask_name: str, variant: str, record_property: Record) -> None:
    dtype, direction = variant.split("-")
    record = recorder(record_property, MIXERS, (mixer_name, mask_name, form, f"{dtype} {direction}"))
    backward = direction == "backward"
    record(mixer_checks.parity(mixer_name, form, mask_name, mixer_checks.DTYPES[dtype], backward))


@pytest.mark.parametrize(DECODE, cells(DECODE, _cells(["empty", "prefilled"]), cost.mixer_decode))
def test_mixer_decode(mixer_name: str, form: str, mask_name: str, start: str, record_property: Record) -> None:
    record = recorder(record_property, MIXERS, (mixer_name, mask_name, form, f"decode {start}"))
    record(mixer_checks.decode(mixer_name, form, mask_name, prefilled=start == "prefilled"))


def test_mixer_plugins_load() -> None:
    """Every installed plugin mixer (entry-point group `andrea.mixers`) loads."""
    assert not broken_mixers(), "\n".join(broken_mixers())
