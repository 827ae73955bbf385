"""Loaded by `pytest --pyargs andrea.testing`: the parity matrix report at the end of the run."""

from andrea.testing.report import pytest_terminal_summary

__all__ = ["pytest_terminal_summary"]
