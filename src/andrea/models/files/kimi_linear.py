"""Kimi Linear as an ANDREA GPT (Kimi Team 2025; transformers' `kimi_linear`), its dense layers: a local Hugging Face
folder (config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_kimi_linear("kimi-linear/")

config.json becomes the net config of conf/model/kimi-linear.yaml's network: RMSNorm before each sub-layer, SwiGLU
of `intermediate_size`, an untied LM head, no biases, no positions, and two layer kinds in the pattern of
`layer_types`:

    linear   linear_attention: Kimi Delta Attention (andrea.mixers.kda), `linear_num_heads` heads with the short
             convolution, the low-rank decay and sigmoid gate, the per-head RMSNorm (eps rms_norm_eps), q and k
             divided by sqrt(|u|² + 1e-6)
    full     full_attention: multi-head latent attention (heads=mla) with no positions, a latent of
             `kv_lora_rank`, the shared key part of `qk_rope_head_dim` left unturned, queries of full rank or
             through a latent of `q_lora_rank`

Tensors, name by name, as the published checkpoint names them (<i>: a layer; kv_b_proj is split):

    model.embed_tokens, lm_head, model.norm              -> embed.token, lm_head, ln_f
    model.layers.<i>.input_layernorm, post_attention_layernorm -> blocks.<i>.ln_1, ln_2
    mlp. or block_sparse_moe. up_proj, gate_proj, down_proj -> blocks.<i>.mlp.fc, gate, proj
    self_attn.q_proj, k_proj, v_proj, b_proj, o_proj     -> attention.q_proj, k_proj, v_proj, b_proj, proj
    self_attn.q_conv1d, k_conv1d, v_conv1d               -> attention.convs.q, k, v
    self_attn.f_a_proj, f_b_proj, A_log (1, 1, H, 1), dt_bias -> attention.f_proj.0, f_proj.1, A_log (H), dt_bias
    self_attn.g_a_proj, g_b_proj, o_norm                 -> attention.gate.0, gate.1, norm
    self_attn.q_proj | q_a_proj, q_a_layernorm, q_b_proj -> attention.latent.q_up | q_down, q_norm, q_up
    self_attn.kv_a_proj_with_mqa, kv_a_layernorm         -> attention.latent.kv_down, kv_norm
    self_attn.kv_b_proj     (per head: key, value rows)  -> attention.latent.kv_up (every key's rows, then values')
    self_attn.o_proj                                     -> attention.proj

config.json is read in either layout transformers reads (`published`): the settings at the top level, as
transformers saves them, or in `linear_attn_config` with `first_k_dense_replace`, as the released checkpoints have
them. A mixture-of-experts layer (a "sparse" one in `mlp_layer_types`), heads of another width than hidden_size /
heads, grouped latent heads or a short convolution other than 4 taps are refused in one line: andrea builds none of
them so far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from andrea.models.files.hf_decoder import (
    SIZES,
    decoder_config,
    decoder_names,
    mapped,
    named_layer_types,
    refuse_first,
)
from andrea.models.files.hf_folder import Family, HFFolderError, positive_ints

FAMILY, MODEL_TYPE = "Kimi Linear", "kimi_linear"
KINDS = {"linear_attention": "linear", "full_attention": "full"}
LINEAR = ("linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim")
LATENT = ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim")
LAYER = [("ln_1", "input_layernorm"), ("ln_2", "post_attention_layernorm")]
MLP = [("mlp.fc", "up_proj"), ("mlp.gate", "gate_proj"), ("mlp.proj", "down_proj")]  # under mlp. or block_sparse_moe.
KDA_LAYER = [("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"), ("b_proj", "b_proj"),
             ("proj", "o_proj"), ("f_proj.0", "f_a_proj"), ("f_proj.1", "f_b_proj"), ("gate.0", "g_a_proj"),
             ("gate.1", "g_b_proj"), ("norm", "o_norm"), ("convs.q", "q_conv1d"), ("convs.k", "k_conv1d"),
             ("convs.v", "v_conv1d")]  # fmt: skip
MLA_LAYER = [("latent.q_up", "q_proj"), ("latent.q_down", "q_a_proj"), ("latent.q_norm", "q_a_layernorm"),
             ("latent.q_up", "q_b_proj"), ("latent.kv_down", "kv_a_proj_with_mqa"),
             ("latent.kv_norm", "kv_a_layernorm"), ("proj", "o_proj")]  # fmt: skip


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """Kimi Linear's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    hf = published(hf)
    sizes = positive_ints(hf, SIZES, config_json)
    linear = positive_ints(hf, LINEAR, config_json)
    latent = positive_ints(hf, LATENT, config_json)
    _check_kimi_linear(hf, sizes, linear, latent, config_json)
    types = named_layer_types(hf, sizes["num_hidden_layers"], KINDS, config_json)
    eps = float(hf.get("rms_norm_eps", 1e-5))
    kinds: dict[str, Any] = {}
    if "linear_attention" in types:
        kinds["linear"] = {"mixer": "kda", "n_head": linear["linear_num_heads"], "norm_eps": eps, "l2_eps": 1e-6}
    if "full_attention" in types:
        q_rank = hf.get("q_lora_rank")
        heads = {"latent": {"kv_rank": latent["kv_lora_rank"], "rope_dim": int(hf.get("qk_rope_head_dim") or 0),
                            "q_rank": q_rank, "norm_eps": 1e-6}}  # fmt: skip  # the latents' RMSNorm: its default eps
        kinds["full"] = {"mixer": "attention", "position": {"kind": "none"}, "heads": heads}
    tied = bool(hf.get("tie_word_embeddings"))
    config = decoder_config(hf, sizes, [KINDS[t] for t in types], kinds, {"name": "softmax"}, activation="swiglu",
                            norm="rmsnorm", norm_place="pre", tie_embeddings=tied)  # fmt: skip
    return config | {"position": "none"}


def published(hf: dict[str, Any]) -> dict[str, Any]:
    """config.json as transformers' KimiLinearConfig reads it: the published checkpoints keep the linear layers'
    settings in `linear_attn_config` (heads, head_dim, short_conv_kernel_size, and the 1-indexed kda_layers and
    full_attn_layers) and the MLPs' kinds as `first_k_dense_replace` (dense before it, experts after); transformers
    saves the context as model_max_length, the released ones as max_position_embeddings, the name read here. A key
    given at the top level stays as given."""
    linear = hf.get("linear_attn_config")
    linear = linear if isinstance(linear, dict) else {}
    settings = {ours: linear[theirs] for ours, theirs in LINEAR_CONFIG.items() if theirs in linear}
    n_layer = hf.get("num_hidden_layers")
    layers = _kinds_by_layer(linear, n_layer) | _mlps_by_layer(hf, n_layer)
    context = {"max_position_embeddings": hf["model_max_length"]} if "model_max_length" in hf else {}
    return settings | layers | context | hf


LINEAR_CONFIG = {"linear_num_heads": "num_heads", "linear_head_dim": "head_dim",
                 "linear_conv_kernel_dim": "short_conv_kernel_size"}  # fmt: skip  # ours <- linear_attn_config's


def _kinds_by_layer(linear: dict[str, Any], n_layer: Any) -> dict[str, Any]:
    """layer_types from linear_attn_config's 1-indexed kda_layers and full_attn_layers, where it has them."""
    if not isinstance(n_layer, int) or not {"kda_layers", "full_attn_layers"} <= set(linear):
        return {}
    kinds = {i: "linear_attention" for i in linear["kda_layers"]} | {i: "full_attention" for i in
                                                                     linear["full_attn_layers"]}  # fmt: skip
    return {"layer_types": [kinds.get(i + 1) for i in range(n_layer)]}


def _mlps_by_layer(hf: dict[str, Any], n_layer: Any) -> dict[str, Any]:
    """mlp_layer_types from first_k_dense_replace (transformers' default 1: every layer after the first experts)."""
    dense = hf.get("first_k_dense_replace", 1)
    if not isinstance(n_layer, int) or not isinstance(dense, int):
        return {}
    return {"mlp_layer_types": ["dense" if i < dense else "sparse" for i in range(n_layer)]}


def _check_kimi_linear(
    hf: dict[str, Any], sizes: dict[str, int], linear: dict[str, int], latent: dict[str, int], config_json: Path
) -> None:
    width = sizes["hidden_size"] // sizes["num_attention_heads"]
    dense = set(hf.get("mlp_layer_types") or []) <= {"dense"} and hf.get("mlp_layer_types")
    problems = [
        (linear["linear_num_heads"] * linear["linear_head_dim"] != sizes["hidden_size"],
         "linear_num_heads x linear_head_dim must be hidden_size: andrea's Kimi Delta Attention heads are "
         "d_model / n_head wide so far"),
        (latent["qk_nope_head_dim"] != width or latent["v_head_dim"] != width,
         f"qk_nope_head_dim and v_head_dim must be hidden_size / num_attention_heads = {width}: andrea's latent "
         "heads are d_model / n_head wide so far"),
        ((hf.get("num_key_value_heads") or sizes["num_attention_heads"]) != sizes["num_attention_heads"],
         "num_key_value_heads must equal num_attention_heads: latent attention derives every head's keys"),
        (not hf.get("qk_rope_head_dim"), "qk_rope_head_dim must be > 0, as Kimi Linear's 64 (the shared key part)"),
        (linear["linear_conv_kernel_dim"] != 4, "linear_conv_kernel_dim must be 4, andrea's short convolution"),
        (not dense, f"mlp_layer_types={hf.get('mlp_layer_types')!r}; andrea reads Kimi Linear's dense layers only "
         "(give a folder whose mlp_layer_types are all 'dense')"),
        (hf.get("hidden_act", "silu") != "silu" or bool(hf.get("attention_bias")),
         "hidden_act silu and no attention_bias are Kimi Linear as andrea builds it"),
    ]  # fmt: skip
    refuse_first(problems, config_json)


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """Kimi Linear's tensors (by their Hugging Face names) under andrea's names, float32, fused ones split (their
    gradients too: every change here is a reshape); a tensor that is not Kimi Linear's, or one missing, is refused
    naming it."""
    split: dict[str, Tensor] = {}
    for i in range(n_layer):
        split |= _split_layer(tensors, f"model.layers.{i}.self_attn.", f"blocks.{i}.attention.")
    read = {name: t for name, t in tensors.items() if not name.endswith(SPLIT)} | split
    names = _names(tensors, n_layer, tied) | {name: name for name in split}  # the split ones: andrea's already
    state = mapped(read, names, {}, FAMILY, where)
    return state | ({"lm_head.weight": state["embed.token.weight"]} if tied else {})


SPLIT = ("self_attn.A_log", "kv_b_proj.weight")  # the tensors `_split_layer` reads


def _names(tensors: dict[str, Tensor], n_layer: int, tied: bool) -> dict[str, str]:
    """The tensors read as they are: Kimi Linear's name -> andrea's, each layer by its kind."""
    names = decoder_names(n_layer, tied, LAYER)
    for i in range(n_layer):
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
        mlp = "mlp" if f"{theirs}mlp.up_proj.weight" in tensors else "block_sparse_moe"
        names |= {f"{theirs}{mlp}.{t}.weight": f"{ours}{o}.weight" for o, t in MLP}
        names |= _mixer_names(tensors, f"{theirs}self_attn.", f"{ours}attention.")
    return names


def _mixer_names(tensors: dict[str, Tensor], theirs: str, ours: str) -> dict[str, str]:
    """One layer's mixer: every KDA tensor (one missing is refused), or the latent attention's the file has (its
    queries of full rank or through a latent)."""
    if f"{theirs}A_log" in tensors:
        names = {f"{theirs}{t}.weight": f"{ours}{o}.weight" for o, t in KDA_LAYER}
        return names | {f"{theirs}dt_bias": f"{ours}dt_bias"}
    return {f"{theirs}{t}.weight": f"{ours}{o}.weight" for o, t in MLA_LAYER if f"{theirs}{t}.weight" in tensors}


def _split_layer(tensors: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    """One layer's reshaped tensors: KDA's A_log (1, 1, H, 1); latent attention's kv_b_proj, head by head its key
    rows then its value rows, as andrea's kv_up: every head's key rows, then every head's value rows."""
    if f"{theirs}A_log" in tensors:
        return {f"{ours}A_log": tensors[f"{theirs}A_log"].float().flatten()}
    if f"{theirs}kv_b_proj.weight" in tensors:
        kv = tensors[f"{theirs}kv_b_proj.weight"].float()
        heads = kv.view(_latent_heads(tensors, theirs), 2, -1, kv.shape[1])  # (H, key|value, d, r)
        return {f"{ours}latent.kv_up.weight": heads.transpose(0, 1).reshape(kv.shape).contiguous()}
    return {}


def _latent_heads(tensors: dict[str, Tensor], theirs: str) -> int:
    """A latent layer's heads H, from its shapes: the queries are H·(d + d_R) rows, o_proj reads H·d values, and
    kv_a_proj_with_mqa writes r + d_R (d_R > 0: net_config refuses 0)."""
    queries = tensors.get(f"{theirs}q_proj.weight", tensors.get(f"{theirs}q_b_proj.weight"))
    if queries is None:
        raise HFFolderError(f"{theirs}: neither q_proj nor q_b_proj is in the folder")
    latent = tensors[f"{theirs}kv_a_proj_with_mqa.weight"].shape[0]  # r + d_R
    rope_dim = latent - tensors[f"{theirs}kv_a_layernorm.weight"].shape[0]
    heads, left = divmod(queries.shape[0] - tensors[f"{theirs}o_proj.weight"].shape[1], rope_dim)
    if left or heads <= 0:
        raise HFFolderError(f"{theirs}: the latent attention's tensors do not agree on a number of heads")
    return heads


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict)


def load_kimi_linear(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A Kimi Linear (dense) folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return READER.load(folder, device)
