"""andrea's export: weights and config as safetensors, no pickle on the way in or out.

A file holds the network's tensors (the tied embedding stored once) and, in its
metadata, the resolved `model.net` config as JSON (and the tokenizer's name), so
`load` rebuilds the very network that was saved. The stored config is data:
`build.build_network` checks it and refuses a network too big for the machine
before a single weight is allocated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from andrea.models.files.build import build_network, check_finite, load_problem
from andrea.models.files.formats import FORMAT, METADATA_FORMAT_KEY, file_format, upgrade
from andrea.models.files.schema import ModelFileError, tokenizer_name
from andrea.utils.files import atomic_write

CONFIG_KEY = "andrea.model.net"  # metadata key of the network's config
TOKENIZER_KEY = "andrea.tokenizer"  # metadata key of the tokenizer's name (absent: token ids)


def save(net: nn.Module, net_config: dict, path: str | Path, tokenizer: str | None = None) -> Path:
    path = Path(path)
    metadata = {CONFIG_KEY: json.dumps(net_config), METADATA_FORMAT_KEY: str(FORMAT)}
    metadata |= {TOKENIZER_KEY: tokenizer} if tokenizer else {}
    with atomic_write(path) as partial:  # an existing file is never half overwritten
        save_model(net, str(partial), metadata=metadata)
        partial.chmod(0o666 & ~_umask())  # safetensors creates it owner-only: readable like the run's other files
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _read_metadata(path: str | Path) -> tuple[dict, str | None]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path} is not a readable safetensors file ({err}); export it again") from None
    if CONFIG_KEY not in metadata:
        raise ValueError(f"{path} carries no andrea model config; export it with andrea.models.files.export.save")
    try:
        config = json.loads(metadata[CONFIG_KEY])
    except (json.JSONDecodeError, RecursionError):
        raise ModelFileError(f"{path}: metadata {CONFIG_KEY} is not JSON; export the model again") from None
    version = file_format(metadata.get(METADATA_FORMAT_KEY), str(path), f"metadata {METADATA_FORMAT_KEY}")
    config = upgrade(config, version, str(path), CONFIG_KEY)
    return config, tokenizer_name(metadata.get(TOKENIZER_KEY), str(path), TOKENIZER_KEY)


def load(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The network saved in `path`, rebuilt from its own config, and that config."""
    net, config, _ = load_with_tokenizer(path, device)
    return net, config


def load_with_tokenizer(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    config, tokenizer = _read_metadata(path)
    net = build_network(config, str(path), CONFIG_KEY, device)
    try:
        load_model(net, str(path), strict=True, device=device)
    except (RuntimeError, SafetensorError) as err:
        raise ValueError(f"{path}: tensors do not fit the saved config ({load_problem(err)})") from None
    check_finite(net, str(path))
    return net.to(device).eval(), config, tokenizer
