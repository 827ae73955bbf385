"""docs/architectures.md's table is the one scripts/architectures_table.py makes from the presets: a preset's
pattern, kinds or cache that changes changes the page, or this fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_page_holds_the_table_the_presets_make():
    spec = importlib.util.spec_from_file_location("architectures_table", ROOT / "scripts" / "architectures_table.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    table = script.table()
    assert "| `model=olmo3` | sliding x3, full |" in table and "| 518 B | 2,048 B |" in table
    assert "| `model=gemma3` | sliding x5, global |" in table and "| 261 B | 1,536 B |" in table
    assert table in (ROOT / "docs" / "architectures.md").read_text()
