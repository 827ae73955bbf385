"""The token mixers' cells of the conformance kit (andrea.testing.mixer_checks): every registered mixer but
attention, built-in or plugin, in every form it declares, against the recurrence it declares. Each cell joins
the token mixer parity matrix (andrea.testing.report): a row per mixer and mask, a column per form."""

from __future__ import annotations

import pytest

from andrea.mixers.layers import broken_mixers
from andrea.testing import mixer_checks
from andrea.testing.report import MIXERS, recorder
from andrea.testing.test_conformance import Record

# as the attention matrix's: bfloat16 forward only (a whole layer's parameter gradients summed over the batch
# in bfloat16 are not the float64 ones to 3e-2)
VARIANTS = ["float32-forward", "float32-backward", "bfloat16-forward"]
CELLS = [(name, form) for name in mixer_checks.mixer_names() for form in mixer_checks.forms_of(name)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mask_name", mixer_checks.MASKS)
@pytest.mark.parametrize(("mixer_name", "form"), CELLS)
def test_mixer_parity(mixer_name: str, form: str, mask_name: str, variant: str, record_property: Record) -> None:
    dtype, direction = variant.split("-")
    record = recorder(record_property, MIXERS, (mixer_name, mask_name, form, f"{dtype} {direction}"))
    backward = direction == "backward"
    record(mixer_checks.parity(mixer_name, form, mask_name, mixer_checks.DTYPES[dtype], backward))


@pytest.mark.parametrize("start", ["empty", "prefilled"])
@pytest.mark.parametrize("mask_name", mixer_checks.MASKS)
@pytest.mark.parametrize(("mixer_name", "form"), CELLS)
def test_mixer_decode(mixer_name: str, form: str, mask_name: str, start: str, record_property: Record) -> None:
    record = recorder(record_property, MIXERS, (mixer_name, mask_name, form, f"decode {start}"))
    record(mixer_checks.decode(mixer_name, form, mask_name, prefilled=start == "prefilled"))


def test_mixer_plugins_load() -> None:
    """Every installed plugin mixer (entry-point group `andrea.mixers`) loads."""
    assert not broken_mixers(), "\n".join(broken_mixers())
