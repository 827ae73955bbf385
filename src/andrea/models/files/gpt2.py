"""GPT-2's weights as an ANDREA GPT: a local Hugging Face GPT-2 folder (config.json + model.safetensors),
or such a model.safetensors with its config.json beside it, read with no pickle and no `transformers`.

    net, config = load_gpt2("gpt2/")                       # GPT(bias=True, activation="gelu_tanh"), tied head
    net, config = load_gpt2("gpt2/", attention={"backend": "eager"})

The config.json is read as data: its sizes become an andrea net config (checked and sized like any
model file: andrea.models.net_config, memory), then GPT-2's tensors are mapped name by name:

    wte, wpe                          -> embed.token, embed.position
    h.<i>.ln_1, ln_2, ln_f            -> blocks.<i>.ln_1, ln_2, ln_f (weight and bias)
    h.<i>.attn.c_attn  (D, 3D) Conv1D -> blocks.<i>.attention.qkv   (3D, D): transposed; q, k, v, heads in order
    h.<i>.attn.c_proj  (D, D)         -> blocks.<i>.attention.proj               (transposed)
    h.<i>.mlp.c_fc, c_proj            -> blocks.<i>.mlp.fc, proj                 (transposed)

`lm_head.weight`, when stored, must equal `wte` (GPT-2 ties them). A pickled `pytorch_model.bin` is
refused with the command that converts it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor, nn

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
TOKENIZER = "gpt2"
IGNORED = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)")  # causal-mask buffers older files carry
LAYER_NAMES = [  # (andrea's module in blocks.<i>, GPT-2's in h.<i>)
    ("ln_1", "ln_1"),
    ("ln_2", "ln_2"),
    ("attention.qkv", "attn.c_attn"),
    ("attention.proj", "attn.c_proj"),
    ("mlp.fc", "mlp.c_fc"),
    ("mlp.proj", "mlp.c_proj"),
]
CONVERT = (
    'python -c "from transformers import GPT2LMHeadModel; '
    "GPT2LMHeadModel.from_pretrained('{folder}').save_pretrained('{folder}', safe_serialization=True)\""
)


class GPT2FileError(ValueError):
    """A GPT-2 folder or file andrea will not load: one line naming the file and what to do."""


def weights_file(path: str | Path) -> Path:
    """The model.safetensors of a GPT-2 folder (or the file itself); a pickle-only folder is refused."""
    path = Path(path)
    if path.is_dir():
        if (path / "model.safetensors").is_file():
            return path / "model.safetensors"
        if (path / "pytorch_model.bin").exists():
            raise GPT2FileError(
                f"{path} holds pytorch_model.bin, a pickle, which andrea does not load (weights only, no pickle); "
                f"convert it once where transformers is installed: {CONVERT.format(folder=path)}"
            )
        raise GPT2FileError(f"{path} has no model.safetensors; give a Hugging Face GPT-2 folder")
    if path.suffix == ".bin":
        raise GPT2FileError(
            f"{path} is a pickle, which andrea does not load (weights only, no pickle); convert it once where "
            f"transformers is installed: {CONVERT.format(folder=path.parent)}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; give a Hugging Face GPT-2 folder or its model.safetensors")
    return path


def _read_config(config_json: Path) -> dict[str, Any]:
    """GPT-2's config.json as a mapping, or GPT2FileError in one line."""
    if not config_json.is_file():
        raise GPT2FileError(f"{config_json} not found: a GPT-2 folder needs its config.json beside model.safetensors")
    try:
        hf = json.loads(config_json.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past the parser's depth
        raise GPT2FileError(f"{config_json} is not JSON; give the config.json of a Hugging Face GPT-2") from None
    if not isinstance(hf, dict) or hf.get("model_type") != "gpt2":
        found = hf.get("model_type") if isinstance(hf, dict) else None
        raise GPT2FileError(f"{config_json}: model_type={found!r}, not 'gpt2'; andrea imports GPT-2 weights only")
    return hf


def _sizes(hf: dict, config_json: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for key in ("vocab_size", "n_positions", "n_layer", "n_embd", "n_head"):
        value = hf.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise GPT2FileError(f"{config_json}: {key}={value!r} must be a positive integer")
        sizes[key] = value
    return sizes


def _check_standard_attention(hf: dict, config_json: Path) -> None:
    """GPT-2's attention as andrea builds it: scaled by 1/sqrt(d), in its own dtype, the LM head tied."""
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if hf.get(flag):
            raise GPT2FileError(f"{config_json}: {flag}=true changes GPT-2's attention; andrea loads the standard one")
    if hf.get("scale_attn_weights") is False or hf.get("tie_word_embeddings") is False:
        raise GPT2FileError(f"{config_json}: unscaled attention or an untied LM head is not GPT-2 as andrea builds it")


def net_config(config_json: Path, attention: dict[str, Any] | None = None) -> dict:
    """GPT-2's config.json -> an andrea net config (GPT, bias, GPT-2's GELU, learned positions, causal)."""
    hf = _read_config(config_json)
    sizes = _sizes(hf, config_json)
    activation = hf.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS:
        raise GPT2FileError(f"{config_json}: activation_function={activation!r} is not one of {', '.join(ACTIVATIONS)}")
    inner = hf.get("n_inner") or 4 * sizes["n_embd"]
    if not isinstance(inner, int) or inner % sizes["n_embd"]:
        raise GPT2FileError(f"{config_json}: n_inner={inner!r} must be a multiple of n_embd={sizes['n_embd']}")
    _check_standard_attention(hf, config_json)
    return {
        "_target_": "andrea.models.gpt.GPT",
        "vocab_size": sizes["vocab_size"],
        "max_context": sizes["n_positions"],
        "n_layer": sizes["n_layer"],
        "d_model": sizes["n_embd"],
        "mlp_ratio": inner // sizes["n_embd"],
        "dropout": 0.0,
        "position": "learned",
        "bias": True,
        "activation": ACTIVATIONS[activation],
        "attention": {"n_head": sizes["n_head"], "backend": "sdpa", "mask": "causal", **(attention or {})},
    }


def _our_names(n_layer: int) -> dict[str, str]:
    """GPT-2's tensor names -> andrea's."""
    names = {"wte.weight": "embed.token.weight", "wpe.weight": "embed.position.weight"}
    names |= {f"ln_f.{p}": f"ln_f.{p}" for p in ("weight", "bias")}
    for i in range(n_layer):
        names |= {
            f"h.{i}.{theirs}.{p}": f"blocks.{i}.{ours}.{p}" for ours, theirs in LAYER_NAMES for p in ("weight", "bias")
        }
    return names


def _as_linear(name: str, tensor: Tensor) -> Tensor:
    """A GPT-2 tensor in nn.Linear's layout: its Conv1D weights (c_attn, c_proj, c_fc) transposed, float32."""
    conv1d = name.endswith(".weight") and any(k in name for k in ("c_attn", "c_proj", "c_fc"))
    return (tensor.t() if conv1d else tensor).float().contiguous()


def state_dict(path: Path, n_layer: int) -> dict[str, Tensor]:
    """GPT-2's tensors under andrea's names (Conv1D weights transposed to nn.Linear's layout)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            stored = f.keys()
            tensors = {name.removeprefix("transformer."): f.get_tensor(name) for name in stored}
    except (SafetensorError, OSError) as err:
        raise GPT2FileError(f"{path} is not a readable safetensors file ({err})") from None
    mapped: dict[str, Tensor] = {}
    names = _our_names(n_layer)
    tied = tensors.pop("lm_head.weight", None)
    for name, tensor in tensors.items():
        if IGNORED.fullmatch(name):
            continue
        if name not in names:
            raise GPT2FileError(f"{path}: tensor {name!r} is not part of GPT-2 (config n_layer={n_layer})")
        mapped[names[name]] = _as_linear(name, tensor)
    missing = sorted(set(names) - set(tensors))
    if missing:
        raise GPT2FileError(f"{path}: GPT-2's {missing[0]} is missing ({len(missing)} tensors in all)")
    if tied is not None and not torch.equal(tied.float(), mapped["embed.token.weight"]):
        raise GPT2FileError(f"{path}: lm_head.weight differs from wte.weight; andrea ties them as GPT-2 does")
    mapped["lm_head.weight"] = mapped["embed.token.weight"]  # the tied head: one matrix under both names
    return mapped


def load_gpt2(path: str | Path, device: str = "cpu", attention: dict[str, Any] | None = None) -> tuple[nn.Module, dict]:
    """A GPT-2 folder (or its model.safetensors) -> an ANDREA GPT in eval mode, and its net config.

    attention: overrides of the attention config (e.g. {"backend": "eager"}); GPT-2 needs causal."""
    from andrea.models.files.build import build_network

    weights = weights_file(path)
    config = net_config(weights.parent / "config.json", attention)
    net = build_network(config, str(path), "config.json", device)
    load_weights(net, weights, config["n_layer"])
    return net.to(device).eval(), config


def load_weights(net: nn.Module, path: str | Path, n_layer: int) -> None:
    """GPT-2's tensors from `path` (a folder or its model.safetensors) into `net`, an ANDREA GPT of its shape."""
    weights = weights_file(path)
    try:
        net.load_state_dict(state_dict(weights, n_layer), strict=True)
    except RuntimeError as err:
        first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise GPT2FileError(f"{weights}: tensors do not fit config.json ({first})") from None
