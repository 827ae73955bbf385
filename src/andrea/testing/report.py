"""The parity matrix printed at the end of a test run: every cell passed, failed, or unsupported
with the reason its backend declares. A pytest hook: the kit's conftest and andrea's own use it."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """List every parity cell: passed, failed, or unsupported with the backend's declared reason."""
    cells: dict[tuple[str, ...], str] = {}
    reasons: dict[str, int] = {}
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            props = dict(getattr(report, "user_properties", ()))
            if report.when != "call" or "parity_cell" not in props:
                continue
            backend, mask, heads, dtype, direction = props["parity_cell"]
            status = props.get("parity_status", "passed") if outcome == "passed" else "FAILED"
            if status.startswith("unsupported"):
                reasons.setdefault(status, len(reasons) + 1)
                status = f"n/a[{reasons[status]}]"
            cells[(backend, heads, dtype, direction, mask)] = "ok" if status == "passed" else status
    if not cells:
        return
    masks = list(dict.fromkeys(key[-1] for key in cells))
    rows: defaultdict[tuple[str, ...], dict[str, str]] = defaultdict(dict)
    for (backend, heads, dtype, direction, mask), status in cells.items():
        rows[(backend, heads, dtype, direction)][mask] = status
    write = terminalreporter.write_line
    terminalreporter.section("attention parity matrix (against naive)")
    width = max(len(m) for m in masks) + 1
    write(f"{'backend':8} {'heads':5} {'dtype':8} {'pass':8} " + "".join(f"{m:>{width}}" for m in masks))
    for key in sorted(rows):
        write(
            f"{key[0]:8} {key[1]:5} {key[2]:8} {key[3]:8} "
            + "".join(f"{rows[key].get(m, '-'):>{width}}" for m in masks)
        )
    counts: defaultdict[str, int] = defaultdict(int)
    for status in cells.values():
        counts["passed" if status == "ok" else status.split("[")[0]] += 1
    write(f"{len(cells)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for reason, number in reasons.items():
        write(f"[{number}] {reason}")
