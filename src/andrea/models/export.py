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
from typing import Any

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
    try:
        save_model(net, str(partial), metadata=metadata)
        partial.chmod(0o666 & ~_umask())  # safetensors creates it owner-only: readable like the run's other files
        partial.replace(path)  # atomic: an existing file is never half overwritten
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _load_problem(err: Exception) -> str:
    """The line of torch's load_state_dict error that names a key (its first line only says it failed)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading") else lines[0]


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
    except (json.JSONDecodeError, RecursionError):
        raise net_config.ModelFileError(f"{path}: metadata {CONFIG_KEY} is not JSON; export the model again") from None
    return config, _tokenizer_name(metadata.get(TOKENIZER_KEY), str(path), TOKENIZER_KEY)


def _tokenizer_name(name: object, where: str, key: str) -> str | None:
    """The tokenizer a file names: one of andrea's, or None (token ids)."""
    from andrea.data.tokenizers import TOKENIZERS

    if name is None:
        return None
    if not isinstance(name, str) or name not in TOKENIZERS:
        raise net_config.ModelFileError(
            f"{where}: {key}={name!r} is not one of andrea's tokenizers ({', '.join(TOKENIZERS)})"
        )
    return name


def build_network(config: Any, where: str, prefix: str, device: str = "cpu") -> nn.Module:
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
    net = build_network(config, str(path), CONFIG_KEY, device)
    try:
        load_model(net, str(path), strict=True, device=device)
    except (RuntimeError, SafetensorError) as err:
        raise ValueError(f"{path}: tensors do not fit the saved config ({_load_problem(err)})") from None
    return net.to(device).eval(), config, tokenizer


def read_checkpoint(checkpoint: str | Path) -> dict:
    """The contents of an andrea-train checkpoint, read with `torch.load(weights_only=True)`: plain
    tensors and containers, never code (mmap: the weights are not copied). One-line errors for a
    missing, corrupt, truncated, pickle-carrying or foreign file."""
    checkpoint = Path(checkpoint)
    if not checkpoint.exists():
        raise FileNotFoundError(
            f"ckpt_path={checkpoint} does not exist; give a .ckpt file such as <run dir>/checkpoints/last.ckpt"
        )
    if not checkpoint.is_file():
        raise ValueError(
            f"ckpt_path={checkpoint} is not a regular file; give a .ckpt file such as <run dir>/checkpoints/last.ckpt"
        )
    if checkpoint.suffix == ".safetensors":
        raise ValueError(
            f"ckpt_path={checkpoint} is a safetensors export: weights only, no training state to resume; "
            "resume from a .ckpt (andrea-sample reads exports)"
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
    _check_structure(state, f"ckpt_path={checkpoint}")
    return state


CALLBACK_PATHS = ("best_model_path", "kth_best_model_path", "last_model_path")  # what ModelCheckpoint restores


def _check_structure(state: dict, where: str) -> None:
    """What Lightning and andrea read from a checkpoint has the type they expect, and no callback state
    names a file outside its own folder (Lightning would later delete it as a stale checkpoint)."""
    weights = state.get("state_dict")
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in weights.items()
    ):
        raise ValueError(
            f"{where}: state_dict is missing or not a mapping of names to tensors; give a checkpoint written by "
            "andrea-train"
        )
    for key, kind in (("callbacks", dict), ("loops", dict), ("optimizer_states", list), ("lr_schedulers", list)):
        if key in state and not isinstance(state[key], kind):
            raise ValueError(
                f"{where}: {key} is a {type(state[key]).__name__}, not a {kind.__name__}; give a checkpoint written "
                "by andrea-train"
            )
    _tokenizer_name(state.get(CHECKPOINT_TOKENIZER_KEY), where, CHECKPOINT_TOKENIZER_KEY)
    for name, callback in state.get("callbacks", {}).items():
        if not isinstance(callback, dict):
            continue
        paths = [(field, callback.get(field)) for field in CALLBACK_PATHS]
        paths += [("best_k_models", path) for path in callback.get("best_k_models") or {}]
        named = [(field, path) for field, path in paths if path]
        if not named:
            continue
        dirpath = callback.get("dirpath")
        folder = Path(dirpath).resolve() if isinstance(dirpath, str) and dirpath else None
        for field, path in named:
            if folder is None or not isinstance(path, str) or not Path(path).resolve().is_relative_to(folder):
                raise ValueError(
                    f"{where}: callbacks[{name!r}].{field}={path!r} lies outside the callback's dirpath={dirpath!r}; "
                    "refused, since resuming would let Lightning delete or overwrite it"
                )


def load_checkpoint(checkpoint: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A Lightning checkpoint of andrea-train -> its network (eval mode), config and tokenizer name."""
    state = read_checkpoint(checkpoint)
    config = state[CHECKPOINT_CONFIG_KEY]
    net = build_network(config, f"ckpt_path={checkpoint}", CHECKPOINT_CONFIG_KEY, device)
    weights = {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    try:
        net.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(f"ckpt_path={checkpoint}: weights do not fit its config ({_load_problem(err)})") from None
    return net.to(device).eval(), config, state.get(CHECKPOINT_TOKENIZER_KEY)  # checked by read_checkpoint


def load_any(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """An andrea-train .ckpt, an andrea .safetensors export, or Hugging Face GPT-2 weights (a folder,
    or a model.safetensors with config.json beside it; andrea.models.gpt2) -> network, config, tokenizer."""
    from andrea.models import gpt2

    path = Path(path)
    if path.is_dir() or path.suffix == ".bin" or path.suffix == ".safetensors" and not _is_andrea_export(path):
        net, config = gpt2.load_gpt2(path, device)
        return net, config, gpt2.TOKENIZER
    if path.suffix == ".safetensors":
        return load_with_tokenizer(path, device)
    return load_checkpoint(path, device)


def _is_andrea_export(path: Path) -> bool:
    """Whether a safetensors file carries andrea's model config (else: a Hugging Face file)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return CONFIG_KEY in (f.metadata() or {})
    except (SafetensorError, OSError):
        return True  # unreadable: andrea's reader says so in its own words


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """A Lightning checkpoint of andrea-train -> a safetensors file of its network."""
    net, config, tokenizer = load_checkpoint(checkpoint)
    return save(net, config, out, tokenizer)
