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

from torch import Tensor, nn

from andrea.models.files.hf_folder import (
    KINDS,
    HFFolderError,
    attention_kind,
    attention_projections,
    layer_types,
    load_family,
    mapped,
    positive_ints,
)

FAMILY, MODEL_TYPE = "OLMo 3", "olmo3"
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
    types = layer_types(hf, sizes["num_hidden_layers"], 4, config_json)
    qknorm = {"name": "qknorm", "eps": eps, "over": "projection"}
    kinds = {KINDS[t]: attention_kind(hf, t, 500000.0, config_json) | {"mechanism": qknorm} for t in sorted(set(types))}
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
        "layout": [KINDS[t] for t in types],
    }


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """OLMo 3's tensors (by their Hugging Face names) under andrea's names, float32; a tensor that is not OLMo 3's,
    or one missing, is refused naming it. Gradients map the same way (the parity tests compare them)."""
    names = {"model.embed_tokens.weight": "embed.token.weight", "model.norm.weight": "ln_f.weight"}
    names |= {} if tied else {"lm_head.weight": "lm_head.weight"}
    for i in range(n_layer):
        names |= {f"model.layers.{i}.{theirs}.weight": f"blocks.{i}.{ours}.weight" for ours, theirs in LAYER_NAMES}
    out = mapped(tensors, names, attention_projections(n_layer), FAMILY, where)
    return out | ({"lm_head.weight": out["embed.token.weight"]} if tied else {})


def load_olmo3(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """An OLMo 3 folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return load_family(Path(folder), MODEL_TYPE, FAMILY, net_config, state_dict, device)
