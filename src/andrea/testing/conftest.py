"""Loaded by `pytest --pyargs andrea.testing`: the parity matrix report at the end of the run. The options
that narrow the kit to a plugin's own cells come with andrea's pytest plugin (andrea.testing.selection):

    pytest --pyargs andrea.testing --andrea-backends einsum           # einsum's cells, with every mask
    pytest --pyargs andrea.testing --andrea-masks strided             # every backend with the strided mask
"""

from andrea.testing.report import pytest_terminal_summary

__all__ = ["pytest_terminal_summary"]
