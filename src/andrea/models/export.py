"""Weights and config as safetensors: no pickle on the way in or out.

A file holds the network's tensors (the tied embedding stored once) and, in its
metadata, the resolved `model.net` config as JSON (and the tokenizer's name), so
`load` rebuilds the very network that was saved. `load_checkpoint` reads a
Lightning checkpoint of andrea-train with `torch.load(weights_only=True)`;
`export_checkpoint` turns one into a safetensors file.

Either way the stored config is data: `net_config` checks it against andrea's schema
(its models, masks and backends, nothing named by the file is imported) and `memory`
refuses a network too big for the machine before a single weight is allocated.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from andrea.models import memory, net_config

CONFIG_KEY = "andrea.model.net"  # metadata key of the network's config
TOKENIZER_KEY = "andrea.tokenizer"  # metadata key of the tokenizer's name (absent: token ids)
CHECKPOINT_CONFIG_KEY = "andrea_net_config"  # where the LightningModule keeps them in a .ckpt
CHECKPOINT_TOKENIZER_KEY = "andrea_tokenizer"


def save(net: nn.Module, net_config: dict, path: str | Path, tokenizer: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # this process's own: writers never share one
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
    try:
        config = json.loads(metadata[CONFIG_KEY])
    except json.JSONDecodeError:
        raise net_config.ModelFileError(f"{path}: metadata {CONFIG_KEY} is not JSON; export the model again") from None
    return config, _tokenizer_name(metadata.get(TOKENIZER_KEY), str(path), TOKENIZER_KEY)


def _tokenizer_name(name, where: str, key: str) -> str | None:
    """The tokenizer a file names: one of andrea's, or None (token ids)."""
    from andrea.data.tokenizers import TOKENIZERS

    if name is not None and name not in TOKENIZERS:
        raise net_config.ModelFileError(
            f"{where}: {key}={name!r} is not one of andrea's tokenizers ({', '.join(TOKENIZERS)})"
        )
    return name


def build_network(config, where: str, prefix: str, device: str = "cpu") -> nn.Module:
    """The network a file's config describes, checked against the schema and the machine's memory
    before anything is allocated; every refusal is one line naming `where` and the key."""
    spec = net_config.parse(config, where, prefix)
    keys = {name: f"{prefix}.{name}" for name in memory.REFERENCE}
    for memory_of in dict.fromkeys(("cpu", device)):  # built on the CPU, then moved to `device`
        problem = memory.too_big(memory.loading(spec), spec.fields, keys, memory_of, "loading")
        if problem:
            raise net_config.ModelFileError(f"{where}: {problem}; refused before allocating, use a smaller model")
    try:
        return net_config.build(spec)
    except ValueError as err:  # the model's own check (heads that do not divide d_model, ...)
        raise net_config.ModelFileError(f"{where}: {prefix}: {str(err).splitlines()[0]}") from None


def load(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The network saved in `path`, rebuilt from its own config, and that config."""
    net, config, _ = load_with_tokenizer(path, device)
    return net, config


def load_with_tokenizer(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    config, tokenizer = _read_metadata(path)
    net = build_network(config, str(path), CONFIG_KEY)
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
        raise FileNotFoundError(
            f"ckpt_path={checkpoint} does not exist; give a .ckpt file such as <run dir>/checkpoints/last.ckpt"
        )
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
        raise ValueError(
            f"ckpt_path={checkpoint} was not written by andrea-train (no {CHECKPOINT_CONFIG_KEY}); give one of its "
            "checkpoints"
        )
    return state


def load_checkpoint(checkpoint: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A Lightning checkpoint of andrea-train -> its network (eval mode), config and tokenizer name."""
    state = read_checkpoint(checkpoint)
    config = state[CHECKPOINT_CONFIG_KEY]
    net = build_network(config, f"ckpt_path={checkpoint}", CHECKPOINT_CONFIG_KEY)
    weights = {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    try:
        net.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(
            f"ckpt_path={checkpoint}: weights do not fit its config ({str(err).splitlines()[0]})"
        ) from None
    tokenizer = _tokenizer_name(
        state.get(CHECKPOINT_TOKENIZER_KEY), f"ckpt_path={checkpoint}", CHECKPOINT_TOKENIZER_KEY
    )
    return net.to(device).eval(), config, tokenizer


def load_any(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A .safetensors export or an andrea-train .ckpt -> network, config, tokenizer name."""
    if Path(path).suffix == ".safetensors":
        return load_with_tokenizer(path, device)
    return load_checkpoint(path, device)


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """A Lightning checkpoint of andrea-train -> a safetensors file of its network."""
    net, config, tokenizer = load_checkpoint(checkpoint)
    return save(net, config, out, tokenizer)
