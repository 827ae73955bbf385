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

from andrea.models.files.hf_decoder import (
    DECODER_LAYER,
    KINDS,
    QK_NORMS,
    SIZES,
    attention_kind,
    decoder_config,
    decoder_hf_config,
    decoder_names,
    decoder_tensors,
    layer_types,
    split_back,
)
from andrea.models.files.hf_folder import Family, HFFolderError, positive_ints

FAMILY, MODEL_TYPE = "OLMo 3", "olmo3"
LAYER_NAMES = [*DECODER_LAYER, *QK_NORMS]


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """OLMo 3's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, SIZES, config_json)
    if hf.get("hidden_act", "silu") != "silu" or hf.get("attention_bias"):
        raise HFFolderError(f"{config_json}: hidden_act silu and no attention_bias are OLMo 3 as andrea builds it")
    types = layer_types(hf, sizes["num_hidden_layers"], 4, config_json)
    kinds = {KINDS[t]: attention_kind(hf, t, 500000.0, config_json) for t in sorted(set(types))}
    qknorm = {"name": "qknorm", "eps": float(hf.get("rms_norm_eps", 1e-6)), "over": "projection"}
    tied = bool(hf.get("tie_word_embeddings", False))
    layout = [KINDS[t] for t in types]
    return decoder_config(hf, sizes, layout, kinds, qknorm, activation="swiglu", norm="rmsnorm", norm_place="post",
                          tie_embeddings=tied)  # fmt: skip


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """OLMo 3's tensors (by their Hugging Face names) under andrea's names, float32; a tensor that is not OLMo 3's,
    or one missing, is refused naming it. Gradients map the same way (the parity tests compare them)."""
    return decoder_tensors(tensors, n_layer, tied, LAYER_NAMES, FAMILY, where)


def hf_config(config: dict[str, Any], specs: tuple[Any, ...]) -> dict[str, Any]:
    """An andrea net config as OLMo 3's config.json (the export checks that the reader makes the same network of
    it)."""
    return decoder_hf_config(config, specs, MODEL_TYPE, "Olmo3ForCausalLM") | {"hidden_act": "silu"}


def tensors_back(state: dict[str, Tensor], n_layer: int, tied: bool, heads: tuple[int, int]) -> dict[str, Tensor]:
    """andrea's tensors under OLMo 3's names."""
    return split_back(decoder_names(n_layer, tied, LAYER_NAMES), heads, state)


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict, hf_config, tensors_back)


def load_olmo3(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """An OLMo 3 folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return READER.load(folder, device)
