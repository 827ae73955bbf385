"""Llama 4's text model as an ANDREA GPT (Meta 2025; transformers' `llama4_text`), its dense layers: a local Hugging
Face folder (config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_llama4("llama4/")

config.json becomes the net config of conf/model/llama4.yaml's network: RMSNorm before each sub-layer, SwiGLU of
`intermediate_size_mlp`, an untied LM head, no biases, and the attention kinds of `layer_types` and
`no_rope_layers` (1: the layer turns RoPE):

    chunked   chunked_attention with RoPE: a causal chunk of `attention_chunk_size` tokens, RoPE at `rope_theta`,
              queries and keys RMS-normalised per head without a gain (`use_qk_norm`; after RoPE in transformers,
              which is the same: RoPE turns a head without changing its norm)
    nope      full_attention without positions: causal, the queries scaled by the attention temperature
              (`attn_temperature_tuning`: attn_scale, floor_scale; andrea.attention.positions.temperature)

RoPE turns adjacent channel pairs (2c, 2c + 1), as Meta's code does (`position.interleaved`). Tensors, name by name:

    model.embed_tokens, lm_head                      -> embed.token, lm_head
    model.layers.<i>.self_attn.q_proj, k_proj, v_proj -> blocks.<i>.attention.qkv (stacked: q, k, v)
    model.layers.<i>.self_attn.o_proj               -> blocks.<i>.attention.proj
    model.layers.<i>.input_layernorm, post_attention_layernorm -> blocks.<i>.ln_1, ln_2
    model.layers.<i>.feed_forward.up_proj, gate_proj, down_proj -> blocks.<i>.mlp.fc, gate, proj
    model.norm                                      -> ln_f

A mixture-of-experts layer (`moe_layers`) is refused: andrea builds Llama 4's attention and dense layers, not its
experts. Heads of another width than hidden_size / num_attention_heads are refused as for Gemma 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from andrea.models.files.hf_decoder import SIZES, decoder_config, decoder_tensors, narrow_heads_problem
from andrea.models.files.hf_folder import Family, HFFolderError, positive_ints

FAMILY, MODEL_TYPE = "Llama 4", "llama4_text"
LAYER_NAMES = [
    ("attention.proj", "self_attn.o_proj"),
    ("ln_1", "input_layernorm"),
    ("ln_2", "post_attention_layernorm"),
    ("mlp.fc", "feed_forward.up_proj"),
    ("mlp.gate", "feed_forward.gate_proj"),
    ("mlp.proj", "feed_forward.down_proj"),
]
KIND_NAMES = {("chunked_attention", 1): "chunked", ("full_attention", 0): "nope",
              ("full_attention", 1): "full", ("chunked_attention", 0): "chunked_nope"}  # fmt: skip


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """Llama 4's (text) config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, (*SIZES[:2], "intermediate_size_mlp", *SIZES[3:]), config_json)
    sizes["intermediate_size"] = sizes.pop("intermediate_size_mlp")  # the dense layers' width
    _check_llama4(hf, sizes, config_json)
    n_layer = sizes["num_hidden_layers"]
    layers = list(zip(_types(hf, n_layer, config_json), _ropes(hf, n_layer, config_json), strict=True))
    kinds = {KIND_NAMES[layer]: _kind(hf, *layer, config_json) for layer in sorted(set(layers))}
    return decoder_config(hf, sizes, [KIND_NAMES[layer] for layer in layers], kinds, {"name": "softmax"},
                          activation="swiglu", norm="rmsnorm", norm_place="pre", tie_embeddings=False)  # fmt: skip


def _check_llama4(hf: dict[str, Any], sizes: dict[str, int], config_json: Path) -> None:
    problem = narrow_heads_problem(hf, sizes)
    if problem:
        raise HFFolderError(f"{config_json}: {problem}")
    if hf.get("moe_layers") != []:
        raise HFFolderError(
            f"{config_json}: moe_layers={hf.get('moe_layers')!r}; andrea reads Llama 4's dense layers only (give a "
            "folder whose moe_layers is [])"
        )
    if hf.get("hidden_act", "silu") != "silu" or hf.get("attention_bias") or hf.get("tie_word_embeddings"):
        raise HFFolderError(
            f"{config_json}: hidden_act silu, no attention_bias and an untied LM head are Llama 4 as andrea builds it"
        )
    rope = hf.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default":
        raise HFFolderError(
            f"{config_json}: rope_parameters.rope_type={rope['rope_type']!r}; andrea reads the default RoPE only so far"
        )


def _types(hf: dict[str, Any], n_layer: int, config_json: Path) -> list[str]:
    types = hf.get("layer_types")
    known = {"chunked_attention", "full_attention"}
    if not isinstance(types, list) or len(types) != n_layer or not set(types) <= known:
        raise HFFolderError(f"{config_json}: layer_types must name {n_layer} layers, each chunked_attention or "
                            "full_attention")  # fmt: skip
    return types


def _ropes(hf: dict[str, Any], n_layer: int, config_json: Path) -> list[int]:
    ropes = hf.get("no_rope_layers")
    if not isinstance(ropes, list) or len(ropes) != n_layer or not set(ropes) <= {0, 1}:
        raise HFFolderError(f"{config_json}: no_rope_layers must give {n_layer} layers each 1 (RoPE) or 0 (none)")
    return [int(rope) for rope in ropes]


def _kind(hf: dict[str, Any], layer_type: str, rope: int, config_json: Path) -> dict[str, Any]:
    """One layer kind: its mask, its position (RoPE, or none with the temperature) and its mechanism."""
    kind: dict[str, Any] = {"mixer": "attention", "mechanism": {"name": "softmax"}}
    if layer_type == "chunked_attention":
        size = positive_ints(hf, ("attention_chunk_size",), config_json)["attention_chunk_size"]
        kind["mask"] = {"name": "chunked", "size": size}
    if rope:
        base = float((hf.get("rope_parameters") or {}).get("rope_theta", 500000.0))
        kind["position"] = {"kind": "rope", "base": base, "interleaved": True}
        if hf.get("use_qk_norm", True):
            eps = float(hf.get("rms_norm_eps", 1e-5))
            kind["mechanism"] = {"name": "qknorm", "eps": eps, "over": "head", "gain": False}
        return kind
    kind["position"] = {"kind": "none"}
    if hf.get("attn_temperature_tuning", True):
        floor = positive_ints(hf, ("floor_scale",), config_json)["floor_scale"]
        kind["position"]["temperature"] = {"scale": float(hf.get("attn_scale", 0.1)), "floor": floor}
    return kind


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """Llama 4's tensors (by their Hugging Face names) under andrea's names, float32; a tensor that is not
    Llama 4's, or one missing, is refused naming it. Gradients map the same way (the parity tests compare them)."""
    return decoder_tensors(tensors, n_layer, tied, LAYER_NAMES, FAMILY, where)


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict)


def load_llama4(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A Llama 4 (text, dense) folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return READER.load(folder, device)
