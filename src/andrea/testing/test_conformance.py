"""The conformance matrix over every registered backend, mask and mechanism (built-in or plugin).

Run with `pytest --pyargs andrea.testing`. A cell a backend declares unsupported is
not skipped: the check asserts the refusal is one its capabilities declare, and the
end-of-run report lists the reason. Each cell carries its cost as a marker (andrea.testing.cost:
`slow` on the repeats andrea's own default run leaves to `-m slow`).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

import pytest
import torch

from andrea.attention import Causal, backend_registry, get_backend, mask_registry, mechanism_registry
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ALiBi
from andrea.attention.registry import PluginError, broken_plugins
from andrea.core.plugins import plugin_failure
from andrea.testing import checks, cost, declared
from andrea.testing.checks import BATCH, HEADS, SEQ
from andrea.testing.cost import cells
from andrea.testing.report import ATTENTION, recorder


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


def every_mechanism() -> tuple[dict[str, Mechanism], dict[str, str]]:
    """Every registered mechanism's examples, by label; and, by name, why a plugin's could not be built (its
    import, its constructor, its examples): one line each, which test_mechanisms_build fails with. Collection
    goes on whatever a plugin does."""
    mechanisms: dict[str, Mechanism] = {}
    broken: dict[str, str] = {}
    for name in mechanism_registry.names():
        try:
            examples = checks.mechanism_examples(name)
        except Exception as err:
            broken[name] = (
                str(err)
                if isinstance(err, PluginError)
                else plugin_failure(mechanism_registry.entry_point(name), err, "built")
            )
            continue
        mechanisms.update({mechanism.label: mechanism for mechanism in examples})
    return mechanisms, broken


def conformance_mechanisms() -> dict[str, Mechanism]:
    """The mechanisms whose kernel is not softmax: what a backend computes differently. Softmax is every other
    cell's; a mechanism that only wraps it (its `project` and `combine`: gated, qknorm) leaves the backend's
    work as it is, and is proven as a block (tests/attention/test_mechanisms.py for the built-ins, and the
    positions' cells here)."""
    return {label: mechanism for label, mechanism in ALL_MECHANISMS.items() if mechanism.kernel != "softmax"}


BACKENDS = backend_registry.names()
MASKS = conformance_masks()
ALL_MECHANISMS, BROKEN_MECHANISMS = every_mechanism()
MECHANISMS = conformance_mechanisms()
POSITIONS = ["rope", "alibi"]  # the positions inside attention: each map's scores must depend on i - j only


def plugin_masks() -> list[str]:
    """The examples of every plugin's mask strategy, by name (those that load)."""
    names = []
    for name in sorted(set(mask_registry.names()) - set(mask_registry.builtins)):
        try:
            names += [mask.name for mask in mask_registry.load(name).examples(BATCH, SEQ)]
        except Exception:  # test_plugin_entry_points_load names it
            continue
    return names


# a mechanism meets the masks that make it handle what softmax handles for it: none, causal,
# a window, padding (rows that see a few keys) and a union with documents (rows that see none); and every
# plugin's mask
MECHANISM_MASKS = ["none", "causal", "sliding_window_3", "causal&padding", "window|document", *plugin_masks()]
VARIANTS = {  # (dtype, backward, ALiBi's score bias)
    "float32-forward": (torch.float32, False, False), "float32-backward": (torch.float32, True, False),
    "bfloat16-forward": (torch.bfloat16, False, False), "float32-forward-alibi": (torch.float32, False, True),
    "float32-backward-alibi": (torch.float32, True, True),
}  # fmt: skip
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DIRECTIONS = ("forward", "backward")


Record = Callable[[str, object], None]  # pytest's record_property fixture


def _cell(record_property: Record, backend: str, row: str, heads: str, variant: str) -> Callable[[str], None]:
    """The attention matrix's cell (andrea.testing.report): its row (backend, mask), column, character."""
    return recorder(record_property, ATTENTION, (backend, row, heads, variant))


PARITY = ("backend_name", "mask_name", "heads", "dtype", "direction")


@pytest.mark.parametrize(PARITY, cells(PARITY, product(BACKENDS, MASKS, HEADS, DTYPES, DIRECTIONS), cost.parity))
def test_parity(
    backend_name: str, mask_name: str, heads: str, dtype: str, direction: str, record_property: Record
) -> None:
    record = _cell(record_property, backend_name, mask_name, heads, f"{dtype} {direction}")
    record(checks.parity(get_backend(backend_name), MASKS[mask_name], heads, DTYPES[dtype], direction == "backward"))


ALIBI = ("backend_name", "mask_name", "heads", "direction")


@pytest.mark.parametrize(ALIBI, cells(ALIBI, product(BACKENDS, MASKS, HEADS, DIRECTIONS), cost.parity_with_alibi))
def test_parity_with_alibi(
    backend_name: str, mask_name: str, heads: str, direction: str, record_property: Record
) -> None:
    record = _cell(record_property, backend_name, mask_name, heads, f"float32 {direction} +alibi")
    alibi = ALiBi(HEADS[heads][0])
    record(
        checks.parity(get_backend(backend_name), MASKS[mask_name], heads, torch.float32, direction == "backward", alibi)
    )


DECODE = ("backend_name", "mask_name", "heads")


@pytest.mark.parametrize(DECODE, cells(DECODE, product(BACKENDS, MASKS, HEADS), cost.decode))
def test_decode_and_weights(backend_name: str, mask_name: str, heads: str) -> None:
    backend = get_backend(backend_name)
    checks.decode(backend, MASKS[mask_name], heads)
    checks.weights(backend, MASKS[mask_name], heads)


def _runs(backend_name: str, mechanism_name: str) -> bool:
    """Whether the backend declares the mechanism's kernel (else one cell shows its refusal is declared)."""
    try:
        return get_backend(backend_name).serves(MECHANISMS[mechanism_name])
    except Exception:  # a backend that cannot be built here: its cells show why
        return True


def mechanism_cells(variants: list[str] | None = None) -> list[tuple[str, ...]]:
    """(backend, mechanism, mask, heads[, variant]) for every backend that runs the mechanism; a backend
    that does not gets one cell, where its refusal is checked to be one its kernels declare."""
    cells: list[tuple[str, ...]] = []
    for backend_name in BACKENDS:
        for mechanism_name in MECHANISMS:
            if not _runs(backend_name, mechanism_name):
                cells.append((backend_name, mechanism_name, "causal", "mha", *(variants or [])[:1]))
                continue
            for mask_name in MECHANISM_MASKS:
                for heads in HEADS:
                    cell = (backend_name, mechanism_name, mask_name, heads)
                    cells += [(*cell, variant) for variant in variants] if variants else [cell]
    return cells


MECHANISM = ("backend_name", "mechanism_name", "mask_name", "heads")


@pytest.mark.parametrize(
    (*MECHANISM, "variant"), cells((*MECHANISM, "variant"), mechanism_cells([*VARIANTS]), cost.mechanism_parity)
)
def test_mechanism_parity(
    backend_name: str, mechanism_name: str, mask_name: str, heads: str, variant: str, record_property: Record
) -> None:
    """Each backend that runs a mechanism, against the mechanism's formula (a refusal: declared)."""
    dtype, backward, alibi = VARIANTS[variant]
    character = variant.replace("-alibi", " +alibi").replace("-", " ")  # float32 forward +alibi
    record = _cell(record_property, backend_name, f"{mask_name} ~{mechanism_name}", heads, character)
    backend, mechanism = get_backend(backend_name), MECHANISMS[mechanism_name]
    score_mod = ALiBi(HEADS[heads][0]) if alibi else None
    record(checks.parity(backend, MASKS[mask_name], heads, dtype, backward, score_mod, mechanism=mechanism))


@pytest.mark.parametrize(MECHANISM, cells(MECHANISM, mechanism_cells(), cost.mechanism_decode))
def test_mechanism_decode_and_weights(backend_name: str, mechanism_name: str, mask_name: str, heads: str) -> None:
    backend, mechanism = get_backend(backend_name), MECHANISMS[mechanism_name]
    checks.decode(backend, MASKS[mask_name], heads, mechanism)
    checks.weights(backend, MASKS[mask_name], heads, mechanism)


PLACED = ("backend_name", "mechanism_name", "position")


@pytest.mark.parametrize(
    PLACED, cells(PLACED, product(BACKENDS, ALL_MECHANISMS, POSITIONS), cost.position_and_mechanism)
)
def test_position_and_mechanism(backend_name: str, mechanism_name: str, position: str, record_property: Record) -> None:
    """A block with each mechanism and each position inside attention, on each backend: shifting every token by
    the same number of positions changes nothing (a refusal: declared)."""
    mechanism = ALL_MECHANISMS[mechanism_name]
    heads = "mha" if mechanism.extra_channels else "gqa"  # a gate carried in the keys needs a key head per query head
    record = _cell(record_property, backend_name, f"causal ~{mechanism_name} @{position}", heads, "float32 forward")
    record(checks.relative_positions(get_backend(backend_name), mechanism, position, heads))


@pytest.mark.parametrize("mechanism_name", MECHANISMS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_mechanism_empty_rows(backend_name: str, mechanism_name: str) -> None:
    checks.empty_rows(get_backend(backend_name), MECHANISMS[mechanism_name])


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_empty_rows_and_capabilities(backend_name: str) -> None:
    backend = get_backend(backend_name)
    checks.empty_rows(backend)
    declared.capabilities(backend, list(MASKS.values()))


@pytest.mark.parametrize("mask_name", MASKS)
def test_mask_flags(mask_name: str) -> None:
    declared.mask_flags(MASKS[mask_name])


@pytest.mark.parametrize("mechanism_name", mechanism_registry.names())
def test_mechanisms_build(mechanism_name: str) -> None:
    """Every registered mechanism builds its examples at the kit's sizes; a plugin whose import, constructor or
    examples fail fails here in one line (its cells cannot run), and every other cell runs as usual."""
    if mechanism_name in BROKEN_MECHANISMS:
        pytest.fail(BROKEN_MECHANISMS[mechanism_name], pytrace=False)


def test_plugin_entry_points_load() -> None:
    """Every installed plugin entry point (backend, mask, config package) loads."""
    broken = broken_plugins()
    if broken:
        pytest.fail("\n".join(broken), pytrace=False)
