"""fla-core's pure-PyTorch reference files, each loaded on its own: fla's package imports its Triton kernels, which
this machine cannot run, and its `ops/<op>/naive.py` files import torch and einops (NSA's two helpers more: its
test gives them)."""

import importlib.util
from pathlib import Path
from types import ModuleType


def fla_naive(op: str) -> ModuleType:
    """fla/ops/<op>/naive.py as a module of its own."""
    spec = importlib.util.find_spec("fla")
    assert spec is not None and spec.submodule_search_locations, "fla-core is in the dev extra"
    path = Path(spec.submodule_search_locations[0]) / "ops" / op / "naive.py"
    loader = importlib.util.spec_from_file_location(f"fla_naive_{op}", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module
