"""Fixtures of the mixer tests."""

import pytest

from andrea.ops.gated_linear import chunk


@pytest.fixture
def chunks(monkeypatch) -> list[int]:
    """The tokens of each chunk the chunked (or parallel) form runs, in order, while the test runs."""
    seen: list[int] = []
    one_chunk = chunk.one_chunk

    def counted(*args):
        seen.append(args[0].shape[2])
        return one_chunk(*args)

    monkeypatch.setattr(chunk, "one_chunk", counted)
    return seen
