"""A pytest plugin (entry point `pytest11`: its options exist in any pytest run where andrea is installed):
`--andrea-backends NAME[,NAME]` and `--andrea-masks NAME[,NAME]` run only the conformance kit's cells of those
backends and of masks made of those strategies (a cell without a backend or a mask is kept);
`--andrea-mechanisms NAME[,NAME]` only the cells of those mechanisms (softmax's own cells are left out; the kit's
tests of no cell, such as the entry points', are kept); `--andrea-mixers NAME[,NAME]` only the cells of those
token mixers, each with its `kit_settings` rows, or of one such row by its name (`deltanet[allow_neg_eigval=true]`;
a mixer's cells run only when it is chosen, once any option is given); `--andrea-selections NAME[,NAME]` only the
cells of those selections of keys (a selection's cells run only when it is chosen, once any option is given).
Unknown names are refused. andrea (and torch) are imported only when an option is given."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("andrea", "andrea's conformance kit")
    group.addoption("--andrea-backends", default=None, help="comma-separated backends whose cells run (default: all)")
    group.addoption("--andrea-masks", default=None, help="comma-separated mask strategies whose cells run")
    group.addoption("--andrea-mechanisms", default=None, help="comma-separated mechanisms whose cells run")
    group.addoption("--andrea-mixers", default=None, help="comma-separated token mixers whose cells run")
    group.addoption("--andrea-selections", default=None, help="comma-separated selections of keys whose cells run")


def pytest_configure(config: pytest.Config) -> None:
    """The marker the kit's cells carry (andrea.testing.cost), known wherever the kit runs."""
    config.addinivalue_line("markers", "slow: a repeat of a kind of work another cell covers (andrea.testing.cost)")


def _chosen(config: pytest.Config, option: str, known: list[str]) -> set[str] | None:
    value = config.getoption(option)
    if value is None:
        return None
    names = {name.strip() for name in value.split(",") if name.strip()}
    unknown = sorted(names - set(known))
    if unknown or not names:
        raise pytest.UsageError(
            f"{option}={value!r}: unknown {', '.join(unknown) or 'empty'}; known: {', '.join(known)}"
        )
    return names


OPTIONS = ("--andrea-backends", "--andrea-masks", "--andrea-mechanisms", "--andrea-mixers", "--andrea-selections")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if all(config.getoption(option) is None for option in OPTIONS):
        return
    from andrea.attention import backend_registry, mask_registry, mechanism_registry
    from andrea.attention.registry import selection_registry
    from andrea.testing.mixer_checks import mixer_rows
    from andrea.testing.test_conformance import ALL_MECHANISMS, MASKS

    backends = _chosen(config, "--andrea-backends", backend_registry.names())
    masks = _chosen(config, "--andrea-masks", mask_registry.names())
    mechanisms = _chosen(config, "--andrea-mechanisms", mechanism_registry.names())
    selections = _chosen(config, "--andrea-selections", selection_registry.names())
    rows = mixer_rows()
    mixers = _chosen(config, "--andrea-mixers", list(dict.fromkeys([name for name, _ in rows.values()] + list(rows))))
    attention = any(chosen is not None for chosen in (backends, masks, mechanisms))

    def mechanism_of(values: dict) -> str | None:
        """The registry name of a cell's mechanism (an example's label: `sink_off_by_one` is sink's)."""
        label = values.get("mechanism_name")
        return ALL_MECHANISMS[label].name if label in ALL_MECHANISMS else label

    def keep(item: pytest.Item) -> bool:
        params = getattr(item, "callspec", None)
        values = params.params if params is not None else {}
        if "selection_name" in values:  # a selection's cells: run where it is chosen
            return selections is not None and values["selection_name"] in selections
        if "mixer_name" in values or not attention:
            return _mixer_wanted(mixers, values, rows)
        return (
            _wanted(backends, values.get("backend_name"))
            and _mechanism_wanted(mechanisms, values, mechanism_of(values))
            and (masks is None or "mask_name" not in values or bool(MASKS[values["mask_name"]].kinds & masks))
        )

    kept = [item for item in items if keep(item)]
    config.hook.pytest_deselected(items=[item for item in items if not keep(item)])
    items[:] = kept


def _mixer_wanted(chosen: set[str] | None, values: dict, rows: dict[str, tuple[str, dict]]) -> bool:
    """A token mixer's cell, kept when its row or the row's mixer is chosen; with only mixers chosen, no attention
    cell is kept (a test of no cell is)."""
    if "mixer_name" in values:
        row = values["mixer_name"]
        return chosen is not None and (row in chosen or rows[row][0] in chosen)
    return "backend_name" not in values and "mechanism_name" not in values


def _wanted(chosen: set[str] | None, name: str | None) -> bool:
    """A cell's backend (or none) among the chosen ones (None: every one is)."""
    return chosen is None or name is None or name in chosen


def _mechanism_wanted(chosen: set[str] | None, values: dict, mechanism: str | None) -> bool:
    """A mechanism cell of a chosen mechanism; with mechanisms chosen, a backend's cell of none (softmax's) is
    not kept."""
    if chosen is None or ("backend_name" not in values and "mechanism_name" not in values):
        return True
    return mechanism in chosen
