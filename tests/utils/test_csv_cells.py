"""CSV cells a spreadsheet shows as written: text that starts as a formula is apostrophe-first; numbers stay."""

import csv
import io

from andrea.utils.csv_cells import as_text, write_rows


def test_a_cell_that_starts_as_a_formula_is_written_as_text():
    rows = [{"overrides": "++seed=1", "label": "=1+2", "who": "@SUM(A1)", "note": "-x", "loss": -0.5, "n": "-3",
             "tab": "\tcmd", "plain": "mechanism=sink"}]  # fmt: skip
    out = io.StringIO(newline="")
    write_rows(out, list(rows[0]), rows)
    (read,) = csv.DictReader(io.StringIO(out.getvalue()))
    assert read == {"overrides": "'++seed=1", "label": "'=1+2", "who": "'@SUM(A1)", "note": "'-x", "loss": "-0.5",
                    "n": "-3", "tab": "'\tcmd", "plain": "mechanism=sink"}  # fmt: skip
    assert as_text(-1) == -1 and as_text("+1e3") == "+1e3" and as_text(None) is None
