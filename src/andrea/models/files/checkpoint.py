"""andrea-train's Lightning checkpoints, read with `torch.load(weights_only=True)`: plain tensors and
containers, never code. `export_checkpoint` turns one into andrea's safetensors export."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import nn

from andrea.models.files.build import build_network, check_finite, load_problem
from andrea.models.files.export import save
from andrea.models.files.formats import CHECKPOINT_FORMAT_KEY, file_format, upgrade
from andrea.models.files.schema import tokenizer_name

CHECKPOINT_CONFIG_KEY = "andrea_net_config"  # where the LightningModule keeps them in a .ckpt
CHECKPOINT_TOKENIZER_KEY = "andrea_tokenizer"


def read_checkpoint(checkpoint: str | Path, setting: str = "ckpt_path") -> dict:
    """The contents of an andrea-train checkpoint, read with `torch.load(weights_only=True)`: plain
    tensors and containers, never code (mmap: the weights are not copied). One-line errors for a
    missing, corrupt, truncated, pickle-carrying or foreign file, naming the `setting` that gave it."""
    checkpoint = Path(checkpoint)
    if not checkpoint.exists():
        raise FileNotFoundError(
            f"{setting}={checkpoint} does not exist; give a .ckpt file such as <run dir>/checkpoints/last.ckpt"
        )
    if not checkpoint.is_file():
        raise ValueError(
            f"{setting}={checkpoint} is not a regular file; give a .ckpt file such as <run dir>/checkpoints/last.ckpt"
        )
    if checkpoint.suffix == ".safetensors":
        raise ValueError(
            f"{setting}={checkpoint} is a safetensors export: weights only, no training state to resume; "
            "resume from a .ckpt (andrea-sample reads exports)"
        )
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{setting}={checkpoint} holds pickled objects beyond plain tensors and containers, refused unrun; "
            "give a checkpoint written by andrea-train"
        ) from None
    except Exception:
        raise ValueError(
            f"{setting}={checkpoint} is truncated or corrupt (not a readable torch checkpoint), so it cannot be "
            "read safely; use another one, e.g. an earlier checkpoint in the same folder"
        ) from None
    if not isinstance(state, dict) or CHECKPOINT_CONFIG_KEY not in state:
        raise ValueError(
            f"{setting}={checkpoint} was not written by andrea-train (no {CHECKPOINT_CONFIG_KEY}); give one of its "
            "checkpoints"
        )
    _check_structure(state, f"{setting}={checkpoint}")
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
    _check_optimizer_states(state, where)
    tokenizer_name(state.get(CHECKPOINT_TOKENIZER_KEY), where, CHECKPOINT_TOKENIZER_KEY)
    file_format(state.get(CHECKPOINT_FORMAT_KEY), where, CHECKPOINT_FORMAT_KEY)
    for name, callback in state.get("callbacks", {}).items():
        if isinstance(callback, dict):
            _check_callback_paths(name, callback, where)


def _named_paths(callback: dict) -> list[tuple[str, Any]]:
    """(field, path) of every file a callback's state names."""
    paths = [(field, callback.get(field)) for field in CALLBACK_PATHS]
    paths += [("best_k_models", path) for path in callback.get("best_k_models") or {}]
    return [(field, path) for field, path in paths if path]


def _check_callback_paths(name: Any, callback: dict, where: str) -> None:
    """Every file a callback's state names (ModelCheckpoint's best and last) lies in the callback's own folder."""
    named = _named_paths(callback)
    if not named:
        return
    dirpath = callback.get("dirpath")
    folder = Path(dirpath).resolve() if isinstance(dirpath, str) and dirpath else None
    for field, path in named:
        if folder is None or not isinstance(path, str) or not Path(path).resolve().is_relative_to(folder):
            raise ValueError(
                f"{where}: callbacks[{name!r}].{field}={path!r} lies outside the callback's dirpath={dirpath!r}; "
                "refused, since resuming would let Lightning delete or overwrite it"
            )


def saved_config(state: dict, where: str) -> dict:
    """The network config of a checkpoint read by `read_checkpoint`, with the settings that give its math today
    (andrea.models.files.formats: a file of an older format)."""
    version = file_format(state.get(CHECKPOINT_FORMAT_KEY), where, CHECKPOINT_FORMAT_KEY)
    return upgrade(state[CHECKPOINT_CONFIG_KEY], version, where, CHECKPOINT_CONFIG_KEY)


def _check_optimizer_states(state: dict, where: str) -> None:
    """What a resume restores the optimizer from: a non-empty list of states (Lightning resumes an empty one
    silently with a fresh optimizer), each with param groups whose lr is a finite number and per-parameter state
    of tensors, each as large as the parameter it belongs to."""
    states = state.get("optimizer_states")
    if states is None or "loops" not in state:  # a checkpoint written without training state (nothing to resume)
        return
    if not states:
        raise ValueError(f"{where}: optimizer_states is empty, so a resume would restart the optimizer; give a "
                         "checkpoint written by andrea-train")  # fmt: skip
    sizes = {tensor.numel() for tensor in state["state_dict"].values()}
    for i, optimizer in enumerate(states):
        _check_optimizer(optimizer, sizes, f"{where}: optimizer_states[{i}]")


def _check_optimizer(optimizer: Any, sizes: set[int], where: str) -> None:
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    if not isinstance(groups, list) or not isinstance(optimizer.get("state"), dict):
        raise ValueError(f"{where} has no param_groups and state; give a checkpoint written by andrea-train")
    for g, group in enumerate(groups):
        _check_learning_rate(group, f"{where}.param_groups[{g}]")
    for key, per_parameter in optimizer["state"].items():
        _check_state_tensors(per_parameter, sizes, f"{where}.state[{key}]")


def _check_learning_rate(group: Any, where: str) -> None:
    lr = group.get("lr") if isinstance(group, dict) else None
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr):
        raise ValueError(f"{where}.lr={lr!r} is not a finite number; give a checkpoint written by andrea-train")


def _check_state_tensors(per_parameter: Any, sizes: set[int], where: str) -> None:
    """One parameter's optimizer state: tensors, each a scalar or as large as some weight of the model (the
    restore checks each against its own weight's shape: andrea.train.lit.resume)."""
    tensors = per_parameter.values() if isinstance(per_parameter, dict) else [None]
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor) or tensor.dim() and tensor.numel() not in sizes:
            raise ValueError(f"{where} does not fit any weight of the model; give a checkpoint written by andrea-train")


def load_checkpoint(checkpoint: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """A Lightning checkpoint of andrea-train -> its network (eval mode), config and tokenizer name."""
    state = read_checkpoint(checkpoint)
    config = saved_config(state, f"ckpt_path={checkpoint}")
    net = build_network(config, f"ckpt_path={checkpoint}", CHECKPOINT_CONFIG_KEY, device)
    weights = _net_weights(state)
    try:
        net.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(f"ckpt_path={checkpoint}: weights do not fit its config ({load_problem(err)})") from None
    check_finite(net, f"ckpt_path={checkpoint}")
    return net.to(device).eval(), config, state.get(CHECKPOINT_TOKENIZER_KEY)  # checked by read_checkpoint


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """A Lightning checkpoint of andrea-train -> a safetensors file of its network."""
    net, config, tokenizer = load_checkpoint(checkpoint)
    return save(net, config, out, tokenizer)


def load_run_weights(net: nn.Module, checkpoint: Path) -> None:
    """An andrea-train checkpoint's network weights into `net`, a network of the same config but for its
    selections of keys (init_from=<.ckpt>): every weight of `net` the file holds, a selection's (`.selection.`)
    the only ones either side may lack; a weight of another name or shape is refused naming it."""
    held = _net_weights(read_checkpoint(checkpoint, "init_from"))
    own = net.state_dict()
    foreign = [n for n in own.keys() ^ held.keys() if ".selection." not in n]
    foreign += [n for n in own.keys() & held.keys() if own[n].shape != held[n].shape]
    if foreign:
        raise ValueError(
            f"init_from={checkpoint}: its weight {sorted(foreign)[0]} does not fit this run's network; give the "
            "checkpoint of a run of the same network"
        )
    net.load_state_dict({n: w for n, w in held.items() if n in own}, strict=False)


def _net_weights(state: dict) -> dict[str, torch.Tensor]:
    """The network's weights of a checkpoint's state_dict (the training module's `net.`), by the network's names."""
    return {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
