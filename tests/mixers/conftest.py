"""Fixtures of the mixer tests."""

import pytest

from andrea.mixers import gated_linear


@pytest.fixture
def chunks(monkeypatch) -> list[int]:
    """The tokens of each chunk the chunked form runs, in order, while the test runs."""
    seen: list[int] = []
    one_chunk = gated_linear._chunk

    def counted(*args):
        seen.append(args[0].shape[2])
        return one_chunk(*args)

    monkeypatch.setattr(gated_linear, "_chunk", counted)
    return seen
