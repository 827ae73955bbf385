"""Weights and config as safetensors: no pickle on the way in or out.

A file holds the network's tensors (the tied embedding stored once) and, in its
metadata, the resolved `model.net` config as JSON (and the tokenizer's name), so
`load` rebuilds the very network that was saved. `load_checkpoint` reads a
Lightning checkpoint of andrea-train with `torch.load(weights_only=True)`;
`export_checkpoint` turns one into a safetensors file.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from hydra.utils import instantiate
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

CONFIG_KEY = "andrea.model.net"  # metadata key of the network's config
TOKENIZER_KEY = "andrea.tokenizer"  # metadata key of the tokenizer's name (absent: token ids)
CHECKPOINT_CONFIG_KEY = "andrea_net_config"  # where the LightningModule keeps them in a .ckpt
CHECKPOINT_TOKENIZER_KEY = "andrea_tokenizer"


def save(net: nn.Module, net_config: dict, path: str | Path, tokenizer: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    metadata = {CONFIG_KEY: json.dumps(net_config)} | ({TOKENIZER_KEY: tokenizer} if tokenizer else {})
    save_model(net, str(partial), metadata=metadata)
    partial.replace(path)  # atomic: an existing file is never half overwritten
    return path


def read_config(path: str | Path) -> dict:
    return _read_metadata(path)[0]


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
        raise ValueError(f"{path} carries no andrea model config; export it with andrea.models.export.save")
    return json.loads(metadata[CONFIG_KEY]), metadata.get(TOKENIZER_KEY)


def load(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The network saved in `path`, rebuilt from its own config, and that config."""
    net, config, _ = load_with_tokenizer(path, device)
    return net, config


def load_with_tokenizer(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    config, tokenizer = _read_metadata(path)
    net = instantiate(config, _convert_="partial")
    try:
        load_model(net, str(path), strict=True, device=device)
    except (RuntimeError, SafetensorError) as err:
        raise ValueError(f"{path}: tensors do not fit the saved config ({str(err).splitlines()[0]})") from None
    return net.to(device).eval(), config, tokenizer


def read_checkpoint(checkpoint: str | Path) -> dict:
    """The contents of an andrea-train checkpoint, read with `torch.load(weights_only=True)`: plain
    tensors and containers, never code (mmap: the weights are not copied). One-line errors for a
    missing, corrupt, truncated, pickle-carrying or foreign file."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"ckpt_path={checkpoint} does not exist; give a .ckpt file such as <run dir>/checkpoints/last.ckpt")
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"ckpt_path={checkpoint} holds pickled objects beyond plain tensors and containers, refused unrun; "
            "give a checkpoint written by andrea-train"
        ) from None
    except Exception:
        raise ValueError(
            f"ckpt_path={checkpoint} is truncated or corrupt (not a readable torch checkpoint), so it cannot be "
            "read safely; use another one, e.g. an earlier checkpoint in the same folder"
        ) from None
    if not isinstance(state, dict) or CHECKPOINT_CONFIG_KEY not in state:
        raise ValueError(f"ckpt_path={checkpoint} was not written by andrea-train (no {CHECKPOINT_CONFIG_KEY}); give one of its checkpoints")
    return state


def load_checkpoint(checkpoint: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A Lightning checkpoint of andrea-train -> its network (eval mode), config and tokenizer name."""
    state = read_checkpoint(checkpoint)
    config = state[CHECKPOINT_CONFIG_KEY]
    net = instantiate(config, _convert_="partial")
    weights = {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    try:
        net.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(f"ckpt_path={checkpoint}: weights do not fit its config ({str(err).splitlines()[0]})") from None
    return net.to(device).eval(), config, state.get(CHECKPOINT_TOKENIZER_KEY)


def load_any(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A .safetensors export or an andrea-train .ckpt -> network, config, tokenizer name."""
    if Path(path).suffix == ".safetensors":
        return load_with_tokenizer(path, device)
    return load_checkpoint(path, device)


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """A Lightning checkpoint of andrea-train -> a safetensors file of its network."""
    net, config, tokenizer = load_checkpoint(checkpoint)
    return save(net, config, out, tokenizer)
