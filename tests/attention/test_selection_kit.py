"""The selection parity rows are the conformance kit's selection cells (andrea.testing.test_selection_conformance):
every registered selection against dense attention over the keys it chose. Plugins installed here join it."""

from andrea.testing.test_selection_conformance import (  # noqa: F401  # collected here as andrea's own tests
    test_selection_check,
    test_selection_parity,
)
