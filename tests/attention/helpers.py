"""Inputs shared by the attention tests: tiny shapes, every mask and head config."""

from __future__ import annotations

from andrea.testing.checks import BATCH, HEAD_DIM, HEADS, SEQ, TOLERANCE, make_qkv
from andrea.testing.test_conformance import conformance_masks as make_masks

BACKENDS = ["naive", "eager", "sdpa", "flex"]

__all__ = ["BACKENDS", "BATCH", "HEAD_DIM", "HEADS", "SEQ", "TOLERANCE", "make_masks", "make_qkv"]
