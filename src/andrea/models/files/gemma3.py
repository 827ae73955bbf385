"""Gemma 3's text model as an ANDREA GPT (Gemma Team 2025; transformers' `gemma3_text`): a local Hugging Face folder
(config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_gemma3("gemma3/")

config.json becomes the net config of conf/model/gemma3.yaml's network: Gemma's RMSNorm (gain 1 + w) before and
after each sub-layer (`both`), GeGLU of `intermediate_size`, embeddings times sqrt(d_model), a tied LM head, no
biases, and two attention kinds in the pattern of `layer_types` (sliding_attention: a causal window of
`sliding_window` tokens, RoPE base 10,000; full_attention: RoPE base 1,000,000), each with QK-norm per head and
scores scaled by query_pre_attn_scalar^-1/2 (andrea's qknorm, its gain w taken as Gemma's 1 + w). Tensors:

    model.embed_tokens                              -> embed.token (and the tied lm_head)
    model.layers.<i>.self_attn.q_proj, k_proj, v_proj -> blocks.<i>.attention.qkv (stacked: q, k, v)
    model.layers.<i>.self_attn.o_proj              -> blocks.<i>.attention.proj
    model.layers.<i>.self_attn.q_norm, k_norm      -> blocks.<i>.attention.mechanism.q_norm, k_norm (1 + w)
    model.layers.<i>.input_layernorm, post_attention_layernorm        -> blocks.<i>.ln_1, ln_1_post
    model.layers.<i>.pre_feedforward_layernorm, post_feedforward_layernorm -> blocks.<i>.ln_2, ln_2_post
    model.layers.<i>.mlp.up_proj, gate_proj, down_proj -> blocks.<i>.mlp.fc, gate, proj
    model.norm                                     -> ln_f

Heads of another width than hidden_size / num_attention_heads (Gemma 3 270M's 256 at 640 / 4) are read at theirs
(heads.head_dim).
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
    layer_names,
    layer_types,
    split_back,
)
from andrea.models.files.hf_folder import Family, HFFolderError, positive_ints

FAMILY, MODEL_TYPE = "Gemma 3", "gemma3_text"
BASES = {"sliding_attention": 10000.0, "full_attention": 1000000.0}  # RoPE's base where config.json gives none
LAYER_NAMES = [*DECODER_LAYER, ("ln_1", "input_layernorm"), ("ln_2", "pre_feedforward_layernorm"), *QK_NORMS]


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """Gemma 3's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, (*SIZES, "query_pre_attn_scalar"), config_json)
    _check_gemma(hf, config_json)
    types = layer_types(hf, sizes["num_hidden_layers"], 6, config_json)
    kinds = {KINDS[t]: attention_kind(hf, t, BASES[t], config_json) for t in sorted(set(types))}
    eps, scale = float(hf.get("rms_norm_eps", 1e-6)), sizes["query_pre_attn_scalar"] ** -0.5
    qknorm = {"name": "qknorm", "eps": eps, "over": "head", "scale": scale}
    config = decoder_config(
        hf, sizes, [KINDS[t] for t in types], kinds, qknorm, activation="geglu", norm="gemma_rmsnorm",
        norm_place="both",
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)), embed_scale=True,
        logit_softcap=hf.get("final_logit_softcapping"),
    )  # fmt: skip
    width = sizes["hidden_size"] // sizes["num_attention_heads"]
    head_dim = positive_ints(hf, ("head_dim",), config_json)["head_dim"] if "head_dim" in hf else width
    if head_dim != width:  # heads of their own width (270M: 256 at 640 / 4)
        config["attention"]["head_dim"] = head_dim
    return config


def _check_gemma(hf: dict[str, Any], config_json: Path) -> None:
    """What andrea builds of Gemma 3: GeGLU, no biases, no score soft-cap, causal."""
    plain = hf.get("hidden_activation", "gelu_pytorch_tanh") == "gelu_pytorch_tanh" and not hf.get("attention_bias")
    if not plain or hf.get("attn_logit_softcapping") or hf.get("use_bidirectional_attention"):
        raise HFFolderError(
            f"{config_json}: gelu_pytorch_tanh, no attention_bias, no attn_logit_softcapping and causal attention "
            "are Gemma 3 as andrea builds it"
        )


def state_dict(
    tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str, gradients: bool = False
) -> dict[str, Tensor]:
    """Gemma 3's tensors (by their Hugging Face names) under andrea's names, float32, the QK-norms' gains as
    1 + w (not for `gradients`: d/dw of 1 + w is d/dw); a tensor that is not Gemma 3's, or one missing, is refused
    naming it."""
    out = decoder_tensors(tensors, n_layer, tied, LAYER_NAMES, FAMILY, where)
    if not gradients:
        out |= {ours: 1.0 + out[ours] for ours in layer_names(n_layer, QK_NORMS).values()}  # Gemma's 1 + w as w
    return out


def hf_config(config: dict[str, Any], specs: tuple[Any, ...]) -> dict[str, Any]:
    """An andrea net config as Gemma 3's (text) config.json (the export checks that the reader makes the same
    network of it)."""
    scale = (specs[0].settings.get("mechanism") or {}).get("scale")
    head_dim = specs[0].settings.get("head_dim") or config["d_model"] // specs[0].settings["n_head"]
    return decoder_hf_config(config, specs, MODEL_TYPE, "Gemma3ForCausalLM") | {
        "head_dim": head_dim,
        "query_pre_attn_scalar": round(scale**-2) if scale else head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "final_logit_softcapping": config.get("logit_softcap"),
        "attn_logit_softcapping": None,
    }


def tensors_back(state: dict[str, Tensor], n_layer: int, tied: bool, heads: tuple[int, int]) -> dict[str, Tensor]:
    """andrea's tensors under Gemma 3's names, the QK-norms' gains back to Gemma's w of 1 + w."""
    out = split_back(decoder_names(n_layer, tied, LAYER_NAMES), heads, state)
    return out | {theirs: out[theirs] - 1.0 for theirs in layer_names(n_layer, QK_NORMS)}


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict, hf_config, tensors_back)


def load_gemma3(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A Gemma 3 (text) folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return READER.load(folder, device)
