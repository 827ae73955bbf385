"""A local Hugging Face model folder read as data, for the families andrea reads in (andrea.models.files.olmo3,
gemma3): its config.json as a mapping checked to be the family's, its model.safetensors as tensors, with no
pickle, no `transformers` and nothing from the folder executed; then the network built and the weights loaded
(what the decoder families share in mapping them: andrea.models.files.hf_decoder). Every refusal is one line
naming the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open
from torch import Tensor, nn


class HFFolderError(ValueError):
    """A Hugging Face folder andrea will not read: one line naming the file and what to do."""


def read_config(folder: Path, model_type: str, family: str) -> dict[str, Any]:
    """folder/config.json as a mapping, its model_type the family's."""
    config_json = folder / "config.json"
    if not config_json.is_file():
        raise HFFolderError(f"{config_json} not found: a {family} folder needs its config.json beside its weights")
    try:
        hf = json.loads(config_json.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past the parser's depth
        raise HFFolderError(f"{config_json} is not JSON; give the config.json of a Hugging Face {family}") from None
    found = hf.get("model_type") if isinstance(hf, dict) else None
    if found != model_type:
        raise HFFolderError(
            f"{config_json}: model_type={found!r}, not {model_type!r}; give a Hugging Face folder of {family}"
        )
    return hf


def positive_ints(hf: dict[str, Any], keys: tuple[str, ...], config_json: Path) -> dict[str, int]:
    """The config's `keys`, each a positive integer."""
    sizes: dict[str, int] = {}
    for key in keys:
        value = hf.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise HFFolderError(f"{config_json}: {key}={value!r} must be a positive integer")
        sizes[key] = value
    return sizes


def read_tensors(folder: Path, family: str) -> dict[str, Tensor]:
    """Every tensor of folder/model.safetensors by its stored name (one file; a pickle is not read)."""
    path = folder / "model.safetensors"
    if not path.is_file():
        other = (
            "a sharded index (model.safetensors.index.json)"
            if (folder / "model.safetensors.index.json").is_file()
            else None
        )
        found = f"it holds {other}, which andrea does not read yet" if other else "it has no model.safetensors"
        raise HFFolderError(f"{folder}: {found}; give a {family} folder with one model.safetensors")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open is no mapping)
    except (SafetensorError, OSError) as err:
        raise HFFolderError(f"{path} is not a readable safetensors file ({err})") from None


@dataclass(frozen=True)
class Family:
    """A family andrea reads in: its name, config.json's model_type, its two readers (config.json, a mapping -> an
    andrea net config; its tensors -> andrea's names, given n_layer, a tied head, and where, for a refusal), and
    their inverses, which the Hugging Face export writes with."""

    name: str
    model_type: str
    config_of: Callable[[dict[str, Any], Path], dict[str, Any]]
    tensors_of: Callable[[dict[str, Tensor], int, bool, str], dict[str, Tensor]]
    # the way back (andrea.models.files.family_export): an andrea net config and its layers' specs -> config.json
    # (ValueError where the family cannot hold it); andrea's tensors (n_layer, a tied head, (n_head, n_kv_head)).
    # None: a family andrea reads but does not write.
    hf_config_of: Callable[[dict[str, Any], tuple[Any, ...]], dict[str, Any]] | None = None
    tensors_back: Callable[[dict[str, Tensor], int, bool, tuple[int, int]], dict[str, Tensor]] | None = None

    def net_config(self, folder: Path) -> dict[str, Any]:
        return self.config_of(read_config(folder, self.model_type, self.name), folder / "config.json")

    def load_weights(self, net: nn.Module, folder: Path, config: dict[str, Any]) -> None:
        """The folder's tensors into `net`, built from `config` (this family's net config), strictly."""
        weights = self.tensors_of(read_tensors(folder, self.name), config["n_layer"], config["tie_embeddings"],
                                  str(folder))  # fmt: skip
        try:
            net.load_state_dict(weights, strict=True)
        except RuntimeError as err:
            first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
            raise HFFolderError(f"{folder}: tensors do not fit config.json ({first})") from None

    def load(self, folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
        """The folder -> an ANDREA GPT in eval mode holding its weights, and its net config (checked and built like
        any model file's)."""
        from andrea.models.files.build import build_network

        folder = Path(folder)
        config = self.net_config(folder)
        net = build_network(config, str(folder), "config.json", device)
        self.load_weights(net, folder, config)
        return net.to(device).eval(), config


def model_type_of(folder: Path) -> object:
    """config.json's model_type, or None where there is no readable config.json (the reader says why)."""
    try:
        hf = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return hf.get("model_type") if isinstance(hf, dict) else None
