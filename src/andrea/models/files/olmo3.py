"""OLMo 3's weights as an ANDREA GPT (Olmo 3, AI2 2025; transformers' `olmo3`): a local Hugging Face folder
(config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_olmo3("olmo3/")

config.json becomes the net config of conf/model/olmo3.yaml's network: RMSNorm after each sub-layer (`post`),
SwiGLU of `intermediate_size`, an untied LM head, no biases, and two attention kinds in the pattern of
`layer_types` (sliding_attention: a causal window of `sliding_window` tokens; full_attention), each with RoPE at
its own `rope_theta` and QK-norm over the whole projection. Its tensors are mapped name by name:

    model.embed_tokens, lm_head                     -> embed.token, lm_head
    model.layers.<i>.self_attn.q_proj, k_proj, v_proj -> blocks.<i>.attention.qkv (stacked: q, k, v)
    model.layers.<i>.self_attn.o_proj              -> blocks.<i>.attention.proj
    model.layers.<i>.self_attn.q_norm, k_norm      -> blocks.<i>.attention.mechanism.q_norm, k_norm
    model.layers.<i>.post_attention_layernorm      -> blocks.<i>.ln_1_post
    model.layers.<i>.mlp.up_proj, gate_proj, down_proj -> blocks.<i>.mlp.fc, gate, proj
    model.layers.<i>.post_feedforward_layernorm    -> blocks.<i>.ln_2_post
    model.norm                                     -> ln_f
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from andrea.models.files.hf_folder import HFFolderError, positive_ints, read_config, read_tensors

FAMILY, MODEL_TYPE = "OLMo 3", "olmo3"
KINDS = {"sliding_attention": "sliding", "full_attention": "full"}  # layer_types -> andrea's kind names
SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "max_position_embeddings")  # fmt: skip
LAYER_NAMES = [  # (andrea's module in blocks.<i>, OLMo 3's in model.layers.<i>)
    ("attention.proj", "self_attn.o_proj"),
    ("attention.mechanism.q_norm", "self_attn.q_norm"),
    ("attention.mechanism.k_norm", "self_attn.k_norm"),
    ("ln_1_post", "post_attention_layernorm"),
    ("mlp.fc", "mlp.up_proj"),
    ("mlp.gate", "mlp.gate_proj"),
    ("mlp.proj", "mlp.down_proj"),
    ("ln_2_post", "post_feedforward_layernorm"),
]


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """OLMo 3's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, SIZES, config_json)
    if hf.get("hidden_act", "silu") != "silu" or hf.get("attention_bias"):
        raise HFFolderError(f"{config_json}: hidden_act silu and no attention_bias are OLMo 3 as andrea builds it")
    eps = float(hf.get("rms_norm_eps", 1e-6))
    layer_types = _layer_types(hf, sizes["num_hidden_layers"], config_json)
    qknorm = {"name": "qknorm", "eps": eps, "over": "projection"}
    kinds = {KINDS[kind]: _kind(hf, kind, config_json) | {"mechanism": qknorm} for kind in sorted(set(layer_types))}
    n_head = sizes["num_attention_heads"]
    return {
        "_target_": "andrea.models.gpt.GPT",
        "vocab_size": sizes["vocab_size"],
        "max_context": sizes["max_position_embeddings"],
        "n_layer": sizes["num_hidden_layers"],
        "d_model": sizes["hidden_size"],
        "d_mlp": sizes["intermediate_size"],
        "position": "rope",
        "activation": "swiglu",
        "norm": "rmsnorm",
        "norm_eps": eps,
        "norm_place": "post",
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        "attention": {
            "n_head": n_head,
            "n_kv_head": hf.get("num_key_value_heads") or n_head,
            "backend": "sdpa",
            "mask": "causal",
            "mechanism": qknorm,
        },  # fmt: skip
        "kinds": kinds,
        "layout": [KINDS[kind] for kind in layer_types],
    }


def _layer_types(hf: dict[str, Any], n_layer: int, config_json: Path) -> list[str]:
    """Each layer's type; OLMo 3's default: every fourth layer full, the rest sliding."""
    types = hf.get("layer_types") or [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n_layer)
    ]
    if not isinstance(types, list) or len(types) != n_layer or not set(types) <= set(KINDS):
        raise HFFolderError(f"{config_json}: layer_types must name {n_layer} layers, each one of {', '.join(KINDS)}")
    return types


def _kind(hf: dict[str, Any], layer_type: str, config_json: Path) -> dict[str, Any]:
    """One attention kind: its RoPE base, and a sliding layer's causal window."""
    rope = (hf.get("rope_parameters") or {}).get(layer_type) or {}
    if rope.get("rope_type", "default") != "default":
        raise HFFolderError(f"{config_json}: rope_parameters.{layer_type}.rope_type={rope['rope_type']!r}; "
                            "andrea reads OLMo 3 with its default RoPE")  # fmt: skip
    kind: dict[str, Any] = {
        "mixer": "attention",
        "position": {"kind": "rope", "base": float(rope.get("rope_theta", 500000.0))},
    }
    if layer_type == "sliding_attention":
        window = positive_ints(hf, ("sliding_window",), config_json)["sliding_window"]
        kind["mask"] = {"name": "sliding_window", "window": window, "causal": True}
    return kind


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """OLMo 3's tensors (by their Hugging Face names) under andrea's names, float32; a tensor that is not OLMo 3's,
    or one missing, is refused naming it. Gradients map the same way (the parity tests compare them)."""
    names = _names(n_layer, tied)
    qkv = {f"model.layers.{i}.self_attn.{p}_proj.weight" for i in range(n_layer) for p in "qkv"}
    unknown, missing = sorted(set(tensors) - set(names) - qkv), sorted((set(names) | qkv) - set(tensors))
    if unknown or missing:
        name, what = (unknown[0], "is not part of") if unknown else (missing[0], "is missing from")
        raise HFFolderError(f"{where}: tensor {name!r} {what} OLMo 3 of num_hidden_layers={n_layer}")
    mapped = {ours: tensors[theirs].float().contiguous() for theirs, ours in names.items()}
    for i in range(n_layer):
        stacked = [tensors[f"model.layers.{i}.self_attn.{p}_proj.weight"].float() for p in "qkv"]
        mapped[f"blocks.{i}.attention.qkv.weight"] = torch.cat(stacked)  # rows: every q head, k head, v head
    if tied:
        mapped["lm_head.weight"] = mapped["embed.token.weight"]
    return mapped


def _names(n_layer: int, tied: bool) -> dict[str, str]:
    """OLMo 3's tensor names -> andrea's, but for q, k and v, which stack into one."""
    names = {"model.embed_tokens.weight": "embed.token.weight", "model.norm.weight": "ln_f.weight"}
    names |= {} if tied else {"lm_head.weight": "lm_head.weight"}
    for i in range(n_layer):
        names |= {f"model.layers.{i}.{theirs}.weight": f"blocks.{i}.{ours}.weight" for ours, theirs in LAYER_NAMES}
    return names


def load_olmo3(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """An OLMo 3 folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    from andrea.models.files.build import build_network

    folder = Path(folder)
    hf = read_config(folder, MODEL_TYPE, FAMILY)
    config = net_config(hf, folder / "config.json")
    net = build_network(config, str(folder), "config.json", device)
    weights = state_dict(read_tensors(folder, FAMILY), config["n_layer"], config["tie_embeddings"], str(folder))
    try:
        net.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise HFFolderError(f"{folder}: tensors do not fit config.json ({first})") from None
    return net.to(device).eval(), config
