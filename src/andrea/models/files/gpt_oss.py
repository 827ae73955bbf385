"""gpt-oss's attention as an ANDREA GPT's (OpenAI 2025; transformers' `gpt_oss`): a local Hugging Face folder
(config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`, every weight
but its experts'.

    net, config = load_gpt_oss_attention("gpt-oss/")

config.json becomes the net config of conf/model/gpt-oss.yaml's network: RMSNorm before each sub-layer, an untied LM
head, biases, and two attention kinds in the pattern of `layer_types` (sliding_attention: a causal window of
`sliding_window` tokens; full_attention), each with a learned sink logit per head (mechanism sink) and RoPE at
`rope_theta` stretched by YaRN (`rope_parameters`: factor, original_max_position_embeddings, beta_fast, beta_slow,
truncate; andrea.attention.positions.yarn). Tensors, name by name:

    model.embed_tokens, lm_head                     -> embed.token, lm_head
    model.layers.<i>.self_attn.q_proj, k_proj, v_proj (weight, bias) -> blocks.<i>.attention.qkv (stacked: q, k, v)
    model.layers.<i>.self_attn.o_proj (weight, bias) -> blocks.<i>.attention.proj
    model.layers.<i>.self_attn.sinks               -> blocks.<i>.attention.mechanism.sink
    model.layers.<i>.input_layernorm, post_attention_layernorm -> blocks.<i>.ln_1, ln_2
    model.norm                                     -> ln_f

andrea does not build the mixture of experts (`mlp.router`, `mlp.experts`): a dense SwiGLU MLP of
`intermediate_size` stands in for it, with its initial weights, so the network read is gpt-oss's attention layers
for study and for the parity tests, not a model that writes gpt-oss's text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from andrea.models.files.hf_decoder import (
    SIZES,
    attention_projections,
    decoder_config,
    layer_types,
    mapped,
    narrow_heads_problem,
)
from andrea.models.files.hf_folder import HFFolderError, positive_ints, read_config, read_tensors

FAMILY, MODEL_TYPE = "gpt-oss", "gpt_oss"
KINDS = {"sliding_attention": "sliding", "full_attention": "full"}
EXPERTS = ".mlp."  # the experts' and the router's tensors, which andrea does not build
LAYER_NAMES = [
    ("attention.proj.weight", "self_attn.o_proj.weight"),
    ("attention.proj.bias", "self_attn.o_proj.bias"),
    ("attention.mechanism.sink", "self_attn.sinks"),
    ("ln_1.weight", "input_layernorm.weight"),
    ("ln_2.weight", "post_attention_layernorm.weight"),
]
YARN_KEYS = {"factor": "factor", "original_max_position_embeddings": "original_context", "beta_fast": "beta_fast",
             "beta_slow": "beta_slow", "truncate": "truncate"}  # fmt: skip  # config.json's -> position.yarn's


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """gpt-oss's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, SIZES, config_json)
    problem = narrow_heads_problem(hf, sizes)
    if problem:
        raise HFFolderError(f"{config_json}: {problem}")
    if hf.get("attention_bias", True) is not True or hf.get("tie_word_embeddings"):
        raise HFFolderError(f"{config_json}: attention_bias and an untied LM head are gpt-oss as andrea builds it")
    types = layer_types(hf, sizes["num_hidden_layers"], 2, config_json)
    position = {"kind": "rope", **_rope(hf, config_json)}
    kinds: dict[str, Any] = {KINDS[t]: {"mixer": "attention", "position": position} for t in sorted(set(types))}
    if "sliding_attention" in types:
        window = positive_ints(hf, ("sliding_window",), config_json)["sliding_window"]
        kinds["sliding"]["mask"] = {"name": "sliding_window", "window": window, "causal": True}
    config = decoder_config(hf, sizes, [KINDS[t] for t in types], kinds, {"name": "sink"}, activation="swiglu",
                            norm="rmsnorm", norm_place="pre", tie_embeddings=False, bias=True)  # fmt: skip
    config["attention"]["backend"] = "eager"  # sdpa has no sink
    return config


def _rope(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """RoPE's base and, for rope_type yarn, YaRN's settings under andrea's names."""
    rope = hf.get("rope_parameters") or {}
    kind = rope.get("rope_type", "default")
    if kind not in ("default", "yarn"):
        raise HFFolderError(f"{config_json}: rope_parameters.rope_type={kind!r}; andrea reads default and yarn")
    out: dict[str, Any] = {"base": float(rope.get("rope_theta", 150000.0))}
    if kind == "yarn":
        out["yarn"] = {ours: rope[theirs] for theirs, ours in YARN_KEYS.items() if rope.get(theirs) is not None}
    return out


def state_dict(tensors: dict[str, Tensor], n_layer: int, where: str) -> dict[str, Tensor]:
    """gpt-oss's tensors but its experts' (by their Hugging Face names) under andrea's names, float32; a tensor
    that is not gpt-oss's, or one missing, is refused naming it. Gradients map the same way."""
    read = {name: tensor for name, tensor in tensors.items() if EXPERTS not in name}
    names = {"model.embed_tokens.weight": "embed.token.weight", "model.norm.weight": "ln_f.weight",
             "lm_head.weight": "lm_head.weight"}  # fmt: skip
    names |= {f"model.layers.{i}.{theirs}": f"blocks.{i}.{ours}"
              for i in range(n_layer) for ours, theirs in LAYER_NAMES}  # fmt: skip
    qkv = attention_projections(n_layer)
    qkv |= {fused.replace("weight", "bias"): [name.replace("weight", "bias") for name in parts]
            for fused, parts in attention_projections(n_layer).items()}  # fmt: skip
    return mapped(read, names, qkv, FAMILY, where)


def load_gpt_oss_attention(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A gpt-oss folder -> an ANDREA GPT in eval mode holding every weight but the experts' (the dense MLPs keep
    their initial weights), and its net config."""
    from andrea.models.files.build import build_network

    folder = Path(folder)
    config = net_config(read_config(folder, MODEL_TYPE, FAMILY), folder / "config.json")
    net = build_network(config, str(folder), "config.json", device)
    weights = state_dict(read_tensors(folder, FAMILY), config["n_layer"], str(folder))
    missing, unexpected = net.load_state_dict(weights, strict=False)
    stray = [name for name in missing if ".mlp." not in name] + list(unexpected)
    if stray:
        raise HFFolderError(f"{folder}: tensors do not fit config.json ({stray[0]})")
    return net.to(device).eval(), config
