"""An ANDREA GPT written as a Hugging Face folder of the decoder family whose network it is (andrea-export --format
hf, andrea.models.files.hf_export, where GPT-2's architecture cannot hold it): config.json and model.safetensors
under the family's names, the inverse of the family's reader (andrea.models.files.hf_families).

A family holds a network when the config its reader makes of the written config.json describes the same network:
the same sizes and parts, and layer for layer the same mixer, heads, positions, mechanism and mask (masks compared
by what they let each query see; the backend, which computes the same function, is not compared). So nothing is
written that the reader, or transformers, would build differently.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from andrea.attention.registry import as_mask
from andrea.mixers.layer_spec import LayerSpec, resolve_layers
from andrea.models.files.hf_families import FAMILIES
from andrea.models.files.hf_folder import Family
from andrea.models.gpt import GPT
from andrea.utils.files import staged

GPT_FIELDS = ("vocab_size", "max_context", "n_layer", "d_model", "position", "activation", "norm", "norm_place",
              "tie_embeddings", "embed_scale", "logit_softcap", "bias", "readout")  # fmt: skip
DEFAULTS = {name: p.default for name, p in inspect.signature(GPT).parameters.items()}  # what a config leaves out
LAYER_FIELDS = ("n_head", "kv_heads", "head_dim", "position", "rope_base", "rope_fraction", "rope_yarn",
                "rope_interleaved", "temperature", "mechanism", "latent", "selection")  # fmt: skip


def fitting(config: dict[str, Any]) -> tuple[Family, dict[str, Any]] | None:
    """The family whose network `config` is, with the config.json that says so; None where none holds it."""
    for family in FAMILIES.values():
        if family.hf_config_of is None:
            continue
        try:
            hf = family.hf_config_of(config, layer_specs(config))
            if same_network(family.config_of(hf, Path("config.json")), config):
                return family, hf
        except (ValueError, KeyError, TypeError):
            continue
    return None


def layer_specs(config: dict[str, Any]) -> tuple[LayerSpec, ...]:
    """Each layer's spec, as the network resolves it."""
    attention = {**(config.get("attention") or {}), "position": config.get("position")}
    place: dict[str, Any] = {key: config[key] for key in ("d_model", "max_context", "bias", "dropout") if key in config}
    return resolve_layers(config.get("layout"), config["n_layer"], config.get("mixer"), config.get("kinds"),
                          attention, place)  # fmt: skip


def same_network(theirs: dict[str, Any], ours: dict[str, Any]) -> bool:
    """Two net configs of the same network (the module's docstring says what counts)."""
    theirs, ours = ({**DEFAULTS, **config} for config in (theirs, ours))
    width = [c.get("d_mlp") or c["mlp_ratio"] * c["d_model"] for c in (theirs, ours)]
    plain = all(theirs[key] == ours[key] for key in GPT_FIELDS)
    eps = math.isclose(theirs["norm_eps"], ours["norm_eps"], rel_tol=1e-9)
    pairs = zip(layer_specs(theirs), layer_specs(ours), strict=True)
    return plain and eps and width[0] == width[1] and all(_same_layer(a, b, ours["max_context"]) for a, b in pairs)


def _same_layer(a: LayerSpec, b: LayerSpec, context: int) -> bool:
    if not (a.attention and b.attention):
        return False  # the families' layers are all attention
    first, second = _compared(a), _compared(b)
    masks = [as_mask(s["mask"]) for s in (first, second)]
    seen = min(context, 2 * max(mask.max_lookback or 0 for mask in masks) + 8)  # past each window, within the context
    drawn = [mask.dense(seen, seen) for mask in masks]
    same_masks = masks[0].max_lookback == masks[1].max_lookback and torch.equal(*drawn)
    return same_masks and all(first.get(k) == second.get(k) for k in LAYER_FIELDS)


def _compared(spec: LayerSpec) -> dict[str, Any]:
    """An attention layer's settings as the comparison reads them: the key/value heads, the rotated share, the
    mechanism and the selection with their defaults written out."""
    settings = dict(spec.settings)
    settings["kv_heads"] = settings.get("n_kv_head") or settings["n_head"]
    settings["rope_fraction"] = settings.get("rope_fraction") or 1.0  # null: the spec's default, all of it
    settings["rope_interleaved"] = bool(settings.get("rope_interleaved"))  # null: the halves
    settings["mechanism"] = _named(settings.get("mechanism"), "softmax")
    selection = _named(settings.get("selection"), "none")
    settings["selection"] = None if selection.get("name") == "none" else selection  # the families choose none
    return settings


def _named(part: Any, default: str) -> Any:
    """A part a config names (a mechanism, a selection) as its mapping: a name, a mapping, or null (`default`)."""
    return {"name": part} if isinstance(part, str) else part or {"name": default}


def write_family_folder(net: nn.Module, config: dict[str, Any], family: Family, hf: dict[str, Any], folder: Path
                        ) -> list[str]:  # fmt: skip
    """The family's folder: config.json, model.safetensors and generation_config.json (no tokenizer: andrea's are
    not the family's), written aside and moved in whole."""
    heads = (hf["num_attention_heads"], hf["num_key_value_heads"])  # as `fitting` found them, layers resolved once
    assert family.tensors_back is not None  # `fitting` offers only the families it can write
    tensors = family.tensors_back(net.state_dict(), config["n_layer"], bool(config.get("tie_embeddings", True)), heads)
    with staged(folder) as staging:
        save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
        (staging / "config.json").write_text(json.dumps(hf, indent=2))
        (staging / "generation_config.json").write_text(json.dumps({"max_length": config["max_context"]}))
    return ["config.json", "model.safetensors", "generation_config.json"]
