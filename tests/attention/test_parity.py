"""The parity matrix is the conformance kit andrea ships (andrea.testing): every registered backend
x mask x head config x dtype x pass against `naive`, with and without a score bias, decode shapes,
weights, empty rows, capabilities and mask flags; every mechanism a backend runs against the
mechanism's own reference; and every mechanism with RoPE and ALiBi in a block, at shifted positions.
Plugins installed here join it."""

from andrea.testing.test_conformance import (  # noqa: F401  # collected here as andrea's own tests
    test_decode_and_weights,
    test_empty_rows_and_capabilities,
    test_mask_flags,
    test_mechanism_decode_and_weights,
    test_mechanism_empty_rows,
    test_mechanism_parity,
    test_parity,
    test_parity_with_alibi,
    test_position_and_mechanism,
)
