"""Weights and config as safetensors: no pickle on the way in or out.

A file holds the network's tensors (the tied embedding stored once) and, in its
metadata, the resolved `model.net` config as JSON, so `load` rebuilds the very
network that was saved. `export_checkpoint` turns a Lightning checkpoint into
such a file; it reads the checkpoint with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from hydra.utils import instantiate
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

CONFIG_KEY = "andrea.model.net"  # metadata key of the network's config
CHECKPOINT_CONFIG_KEY = "andrea_net_config"  # where the LightningModule keeps it in a .ckpt


def save(net: nn.Module, net_config: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_model(net, str(partial), metadata={CONFIG_KEY: json.dumps(net_config)})
    partial.replace(path)  # atomic: an existing file is never half overwritten
    return path


def read_config(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path} is not a readable safetensors file ({err}); export it again") from None
    if CONFIG_KEY not in metadata:
        raise ValueError(f"{path} carries no andrea model config; export it with andrea.models.export.save")
    return json.loads(metadata[CONFIG_KEY])


def load(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The network saved in `path`, rebuilt from its own config, and that config."""
    config = read_config(path)
    net = instantiate(config, _convert_="partial")
    try:
        load_model(net, str(path), strict=True, device=device)
    except (RuntimeError, SafetensorError) as err:
        raise ValueError(f"{path}: tensors do not fit the saved config ({str(err).splitlines()[0]})") from None
    return net.to(device).eval(), config


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """A Lightning checkpoint of andrea-train -> a safetensors file of its network."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"ckpt_path={checkpoint} does not exist")
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated file, or one carrying pickled code
        raise ValueError(f"ckpt_path={checkpoint} cannot be read safely: {str(err).splitlines()[0]}") from None
    if CHECKPOINT_CONFIG_KEY not in state:
        raise ValueError(f"ckpt_path={checkpoint} was not written by andrea-train (no {CHECKPOINT_CONFIG_KEY})")
    config = state[CHECKPOINT_CONFIG_KEY]
    net = instantiate(config, _convert_="partial")
    weights = {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    net.load_state_dict(weights)
    return save(net, config, out)
