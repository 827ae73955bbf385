"""The token mixers' parity rows are the conformance kit's mixer cells (andrea.testing.test_mixer_conformance):
every registered mixer in every form x mask x dtype x pass against the recurrence it declares, and decoding from
an empty and from a prefilled cache. Plugins installed here join it."""

from andrea.testing.test_mixer_conformance import (  # noqa: F401  # collected here as andrea's own tests
    test_mixer_decode,
    test_mixer_parity,
    test_mixer_plugins_load,
)
