"""A network built from a checked model-file config, by andrea itself: the class from the schema's MODELS,
the mask and backend from the registries; never hydra.utils.instantiate."""

from __future__ import annotations

from typing import Any

from torch import nn

from andrea.models import memory, mixer_sizes
from andrea.models.files.schema import ModelFileError, NetSpec, model_class, parse
from andrea.models.files.schema_masks import mask_targets


def build(spec: NetSpec) -> nn.Module:
    """The network `spec` describes, constructed by andrea (no instantiate: the class comes from MODELS;
    the network reads its mask and backend from the registries, attention.as_mask and as_backend)."""
    fields, attention = dict(spec.fields), spec.attention or {}
    mask = attention.get("mask")
    if isinstance(mask, dict) and "_target_" in mask:  # an older file names the mask's class: its name instead
        fields_of_mask = {k: v for k, v in mask.items() if k not in ("name", "_target_")}
        fields["attention"] = {**attention, "mask": {**fields_of_mask, "name": mask_targets()[mask["_target_"]]}}
    return model_class(spec.target)(**fields)


def build_network(config: Any, where: str, prefix: str, device: str = "cpu") -> nn.Module:
    """The network a file's config describes, checked against the schema and the machine's memory
    before anything is allocated; every refusal is one line naming `where` and the key."""
    spec = parse(config, where, prefix)
    grown = mixer_sizes.mixer_growth(spec)
    keys = {name: f"{prefix}.{name}" for name in memory.REFERENCE} | {key: f"{prefix}.{key}" for key in grown}
    try:
        need = memory.loading(spec)
    except mixer_sizes.MixerSizeError as err:
        raise ModelFileError(f"{where}: {prefix}.{err}; refused before allocating, use a smaller model") from None
    for memory_of in dict.fromkeys(("cpu", device)):  # built on the CPU, then moved to `device`
        problem = memory.too_big(need, spec.fields, keys, memory_of, "loading", grown)
        if problem:
            raise ModelFileError(f"{where}: {problem}; refused before allocating, use a smaller model")
    try:
        return build(spec)
    except ValueError as err:  # the model's own check (heads that do not divide d_model, ...)
        raise ModelFileError(f"{where}: {prefix}: {str(err).splitlines()[0]}") from None


def check_finite(net: nn.Module, where: str) -> None:
    """Every weight a file gave the network is finite: a nan or inf (a sink logit, a norm's gain) would make
    every output NaN, far from the file that caused it. Refused in one line naming the file and the tensor."""
    for name, tensor in net.state_dict().items():
        if tensor.is_floating_point() and not bool(tensor.isfinite().all()):
            raise ModelFileError(f"{where}: tensor {name} holds nan or inf; give a file of a healthy run")


def load_problem(err: Exception) -> str:
    """The line of torch's load_state_dict error that names a key (its first line only says it failed)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading") else lines[0]
