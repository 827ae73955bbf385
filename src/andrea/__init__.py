"""andrea: a plugin-style attention model zoo with a Hydra-configured Lightning pipeline.

The house, bottom layer first (each imports only the ones above it in this list):

    utils/      value rules and file writes every layer shares (torch only)
    attention/  the zoo: contract, registry, backends, masks, positions, heads, block, KV cache
    models/     networks, generation, and model files (checkpoints, safetensors, GPT-2 import)
    data/       the synthetic tasks and text, as Lightning data modules
    lens/       looking inside: head-role metrics, verdicts, maps, explorer, interventions
    train/      the training application: config checks, Hydra run, Lightning module and callbacks, sweeps
    cli/        thin entry points, one per console script
    testing/    the conformance kit for backends and masks (`pytest --pyargs andrea.testing`)
    bench/      timing and memory helpers for scripts/bench_*.py

`import andrea` imports nothing else: Hydra's plugins and resolvers are registered by andrea.train.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__version__ = "0.1.0"

# Modules that moved into the packages above; the old import paths keep working, with a
# DeprecationWarning, until the next release.
_MOVED: dict[str, str | tuple[str, ...]] = {
    **{
        f"andrea.{name}": f"andrea.train.{name}"
        for name in (
            "config",
            "keys",
            "hydra_run",
            "hydra_internals",
            "run_dir",
            "resolvers",
            "pipeline",
            "sweep",
            "sweep_report",
        )
    },  # fmt: skip
    **{f"andrea.{name}": f"andrea.lens.{name}" for name in ("viz", "explorer", "interventions")},
    "andrea.lit": "andrea.train.lit",
    "andrea.metrics": "andrea.lens.head_roles",
    "andrea.metrics.head_roles": "andrea.lens.head_roles",
    "andrea.metrics.verdict": "andrea.lens.verdict",
    "andrea.metrics.transformer_lens": "andrea.lens.transformer_lens",
    "andrea.torch_internals": "andrea.bench.torch_internals",
    "andrea.cli.errors": "andrea.cli.app",
    "andrea.models.net_config": ("andrea.models.files.schema", "andrea.models.files.build"),
    "andrea.models.gpt2": "andrea.models.files.gpt2",
    "andrea.models.export": (  # split by the file it reads
        "andrea.models.files.export",
        "andrea.models.files.checkpoint",
        "andrea.models.files.load",
        "andrea.models.files.schema",
        "andrea.models.files.build",
    ),
}
_PACKAGES = ("andrea.lit", "andrea.metrics")


def _new_names(name: str) -> tuple[str, ...]:
    if name in _MOVED:
        new = _MOVED[name]
        return new if isinstance(new, tuple) else (new,)
    parent, _, leaf = name.rpartition(".")
    return (f"{_MOVED[parent]}.{leaf}",) if parent in _MOVED else ()  # andrea.lit.module


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as a module that holds the new module's names (the same objects)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not _new_names(name):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=name in _PACKAGES)

    def exec_module(self, module: ModuleType) -> None:
        new = _new_names(module.__name__)
        warnings.warn(f"{module.__name__} moved to {' / '.join(new)}", DeprecationWarning, stacklevel=2)
        for target in reversed(new):
            module.__dict__.update({k: v for k, v in vars(importlib.import_module(target)).items() if k[:2] != "__"})


sys.meta_path.append(_MovedModules())
