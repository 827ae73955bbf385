"""The conformance matrix over every registered backend and mask (built-in or plugin).

Run with `pytest --pyargs andrea.testing`. A cell a backend declares unsupported is
not skipped: the check asserts the refusal is one its capabilities declare, and the
end-of-run report lists the reason.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from andrea.attention import Causal, backend_registry, get_backend, mask_registry
from andrea.attention.masks import Mask
from andrea.attention.positions import ALiBi
from andrea.attention.registry import PluginError, broken_plugins
from andrea.testing import checks
from andrea.testing.checks import BATCH, HEADS, SEQ


def conformance_masks() -> dict[str, Mask]:
    """Every registered mask's examples, and compositions of them with `&` and `|`. A plugin mask that cannot
    be loaded has no examples: test_plugin_entry_points_load fails for it, naming the entry point."""
    masks: dict[str, Mask] = {}
    for name in mask_registry.names():
        try:
            strategy = mask_registry.load(name)
        except PluginError:
            continue
        for mask in strategy.examples(BATCH, SEQ):
            masks.setdefault(mask.name, mask)
    padding, document = masks["padding"], masks["document"]
    window = mask_registry.load("sliding_window").examples(BATCH, SEQ)[0]
    combined = {"causal&padding": Causal() & padding, "causal&document": Causal() & document}
    return masks | combined | {"window|document": window | document}


BACKENDS = backend_registry.names()
MASKS = conformance_masks()
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


Record = Callable[[str, object], None]  # pytest's record_property fixture


def _cell(record_property: Record, *cell: str) -> Callable[[str], None]:
    """Records the cell before its check runs (a failed check still has its cell: the report draws X),
    and returns what records the check's status."""
    record_property("parity_cell", cell)
    return lambda status: record_property("parity_status", status)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_parity(
    backend_name: str, mask_name: str, heads: str, dtype: str, direction: str, record_property: Record
) -> None:
    record = _cell(record_property, backend_name, mask_name, heads, dtype, direction)
    record(checks.parity(get_backend(backend_name), MASKS[mask_name], heads, DTYPES[dtype], direction == "backward"))


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_parity_with_alibi(
    backend_name: str, mask_name: str, heads: str, direction: str, record_property: Record
) -> None:
    record = _cell(record_property, backend_name, f"{mask_name} +alibi", heads, "float32", direction)
    alibi = ALiBi(HEADS[heads][0])
    record(
        checks.parity(get_backend(backend_name), MASKS[mask_name], heads, torch.float32, direction == "backward", alibi)
    )


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_decode_and_weights(backend_name: str, mask_name: str, heads: str) -> None:
    backend = get_backend(backend_name)
    checks.decode(backend, MASKS[mask_name], heads)
    checks.weights(backend, MASKS[mask_name], heads)


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_empty_rows_and_capabilities(backend_name: str) -> None:
    backend = get_backend(backend_name)
    checks.empty_rows(backend)
    checks.capabilities(backend, list(MASKS.values()))


@pytest.mark.parametrize("mask_name", MASKS)
def test_mask_flags(mask_name: str) -> None:
    checks.mask_flags(MASKS[mask_name])


def test_plugin_entry_points_load() -> None:
    """Every installed plugin entry point (backend, mask, config package) loads."""
    broken = broken_plugins()
    if broken:
        pytest.fail("\n".join(broken), pytrace=False)
