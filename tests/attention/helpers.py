"""Inputs shared by the attention tests: tiny shapes, every mask and head config."""

from __future__ import annotations

from andrea.testing.checks import BATCH, HEAD_DIM, HEADS, SEQ, make_qkv
from andrea.testing.formula import TOLERANCE
from andrea.testing.test_conformance import conformance_masks as make_masks

BACKENDS = ["naive", "eager", "sdpa", "flex"]

__all__ = ["BACKENDS", "BATCH", "HEAD_DIM", "HEADS", "SEQ", "TOLERANCE", "files_plugin", "make_masks", "make_qkv"]


def files_plugin(site, name, entry_points, modules=None):
    """A plugin installed the lightest way into the folder `site`: a dist-info folder with its entry points
    ((group, name, "module:attribute") triples), and its modules ({module name: source})."""
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "".join(f"[{group}]\n{key} = {value}\n" for group, key, value in entry_points)
    )
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)
