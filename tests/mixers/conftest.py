"""Fixtures of the mixer tests."""

import pytest

from andrea.ops.gated_linear import chunk


@pytest.fixture
def chunks(monkeypatch) -> list[int]:
    """The tokens of each chunk the chunked (or parallel) form runs, in order, while the test runs."""
    seen: list[int] = []
    across_chunks = chunk.across_chunks

    def counted(*args):
        n, size = args[0].shape[2:4]  # q: (B, H, n, C, K)
        seen.extend([size] * n)
        return across_chunks(*args)

    monkeypatch.setattr(chunk, "across_chunks", counted)
    return seen
