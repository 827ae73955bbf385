"""Thin command-line entry points."""
