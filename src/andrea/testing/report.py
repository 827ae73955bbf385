"""The parity matrix printed at the end of a test run: every cell passed, failed, or unsupported
with the reason its backend declares. A pytest hook: the kit's conftest and andrea's own use it.

One row per backend and mask, one column per head config; each column holds one character per
variant (VARIANTS), so the table stays ~70 characters wide however many plugins are installed.
A cell is recorded before its check runs, so a failed check is drawn X and counted: the counts
equal pytest's own for the parity tests.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter

# (dtype, pass, score bias) of each character in a head config's column, in order
VARIANTS = [
    ("float32", "forward", ""),
    ("float32", "backward", ""),
    ("bfloat16", "forward", ""),
    ("bfloat16", "backward", ""),
    ("float32", "forward", " +alibi"),
    ("float32", "backward", " +alibi"),
]
PASSED, FAILED, NOT_RUN = ".", "X", " "


Cell = tuple[str, str, str, str, str, str]  # (backend, mask, heads, dtype, pass, bias)


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """List every parity cell: passed, failed, or unsupported with the backend's declared reason."""
    reasons: dict[str, int] = {}
    cells = _cells(terminalreporter, reasons)
    if not cells:
        return
    write = terminalreporter.write_line
    terminalreporter.section("attention parity matrix (against naive; a <mixer>/<form> row: against its recurrence)")
    for line in _table(cells):
        write(line)
    order = ", ".join(f"{dtype} {direction}{bias}" for dtype, direction, bias in VARIANTS)
    write(f"each column, per head config: {order}")
    write(f"{PASSED} passed, {FAILED} failed, n unsupported for reason [n], blank not run")
    symbols = list(cells.values())
    counts = {
        "passed": symbols.count(PASSED),
        "failed": symbols.count(FAILED),
        "unsupported": len(symbols) - symbols.count(PASSED) - symbols.count(FAILED),
    }
    write(f"{len(cells)} cells: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for reason, number in reasons.items():
        write(f"[{number}] {reason}")


def _cells(terminalreporter: TerminalReporter, reasons: dict[str, int]) -> dict[Cell, str]:
    """Each parity cell the run recorded and its symbol; an unsupported one's reason numbered in `reasons`."""
    cells: dict[Cell, str] = {}
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            props = dict(getattr(report, "user_properties", ()))
            if report.when != "call" or "parity_cell" not in props:
                continue
            backend, mask, heads, dtype, direction = props["parity_cell"]
            mask, _, bias = mask.partition(" +")
            status = props.get("parity_status", "passed") if outcome == "passed" else "FAILED"
            cells[(backend, mask, heads, dtype, direction, f" +{bias}" if bias else "")] = _symbol(status, reasons)
    return cells


def _symbol(status: str, reasons: dict[str, int]) -> str:
    if status.startswith("unsupported"):
        return str(reasons.setdefault(status, len(reasons) + 1))
    return PASSED if status == "passed" else FAILED


def _table(cells: dict[Cell, str]) -> list[str]:
    """The matrix's lines: a row per backend and mask, a column per head config, a character per variant."""
    heads_configs = list(dict.fromkeys(key[2] for key in cells))
    rows = _rows(cells, heads_configs)
    backend_width = max(len("backend"), *(len(backend) for backend, _ in rows))
    mask_width = max(len(mask) for _, mask in rows)
    lines = [
        f"{'backend':{backend_width}} {'mask':{mask_width}}  "
        + "  ".join(f"{h:{len(VARIANTS)}}" for h in heads_configs)
    ]
    for backend, mask in sorted(rows):
        cells_of_row = "  ".join(rows[(backend, mask)][h] for h in heads_configs)
        lines.append(f"{backend:{backend_width}} {mask:{mask_width}}  {cells_of_row}")
    return lines


def _rows(cells: dict[Cell, str], heads_configs: list[str]) -> dict[tuple[str, str], dict[str, str]]:
    """(backend, mask) -> head config -> its column: a character per variant."""
    rows: defaultdict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for backend, mask in dict.fromkeys(key[:2] for key in cells):
        for heads in heads_configs:
            rows[(backend, mask)][heads] = "".join(
                cells.get((backend, mask, heads, *variant), NOT_RUN) for variant in VARIANTS
            )
    return rows
