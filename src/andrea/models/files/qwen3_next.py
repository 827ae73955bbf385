"""Qwen3-Next as an ANDREA GPT (Qwen Team 2025; transformers' `qwen3_next`), its dense layers: a local Hugging Face
folder (config.json + model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_qwen3_next("qwen3-next/")

config.json becomes the net config of conf/model/qwen3-next.yaml's network: Gemma-style RMSNorm (gain 1 + w) before
each sub-layer, SwiGLU of `intermediate_size`, an untied LM head, no biases, and two layer kinds in the pattern of
`layer_types`:

    linear   linear_attention: Gated DeltaNet (andrea.mixers.deltanet) with the short convolution, the swish output
             gate and its RMSNorm (eps rms_norm_eps), values linear_value_head_dim / linear_key_head_dim as wide
    full     full_attention: gated attention (mechanism gated_qknorm: QK-norm per head, gain 1 + w, and a sigmoid
             gate on each head's output), RoPE at `rope_theta` on `partial_rotary_factor` of each head

Tensors, name by name (<i>: a layer; Qwen3-Next fuses some projections, which are split):

    model.embed_tokens, lm_head, model.norm              -> embed.token, lm_head, ln_f
    model.layers.<i>.input_layernorm, post_attention_layernorm -> blocks.<i>.ln_1, ln_2
    model.layers.<i>.mlp.up_proj, gate_proj, down_proj   -> blocks.<i>.mlp.fc, gate, proj
    linear_attn.in_proj_qkvz  (per key head: q, k, v, z) -> attention.q_proj, k_proj, v_proj, gate
    linear_attn.in_proj_ba    (per key head: b, a)       -> attention.b_proj, a_proj
    linear_attn.conv1d        (channels q, k, v)         -> attention.convs.q, k, v
    linear_attn.A_log, dt_bias, norm, out_proj           -> attention.A_log, dt_bias, norm, proj
    self_attn.q_proj          (per head: query, gate)    -> attention.qkv (query rows), attention.mechanism.gate
    self_attn.k_proj, v_proj                             -> attention.qkv (stacked after the queries)
    self_attn.q_norm, k_norm (1 + w), o_proj             -> attention.mechanism.q_norm, k_norm, attention.proj

A mixture-of-experts layer (a layer not in `mlp_only_layers`), more value heads than key heads in the Gated
DeltaNet layers, or heads of another width than hidden_size / heads are refused in one line: andrea builds none of
them so far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from andrea.models.files.hf_decoder import (
    SIZES,
    decoder_config,
    decoder_names,
    mapped,
    named_layer_types,
    narrow_heads_problem,
    refuse_first,
)
from andrea.models.files.hf_folder import Family, positive_ints

FAMILY, MODEL_TYPE = "Qwen3-Next", "qwen3_next"
KINDS = {"linear_attention": "linear", "full_attention": "full"}
LINEAR = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
          "linear_conv_kernel_dim")  # fmt: skip
LAYER = [("ln_1", "input_layernorm"), ("ln_2", "post_attention_layernorm"), ("mlp.fc", "mlp.up_proj"),
         ("mlp.gate", "mlp.gate_proj"), ("mlp.proj", "mlp.down_proj")]  # fmt: skip
LINEAR_LAYER = [("attention.A_log", "linear_attn.A_log"), ("attention.dt_bias", "linear_attn.dt_bias"),
                ("attention.norm.weight", "linear_attn.norm.weight"),
                ("attention.proj.weight", "linear_attn.out_proj.weight")]  # fmt: skip
FULL_LAYER = [("attention.mechanism.q_norm.weight", "self_attn.q_norm.weight"),
              ("attention.mechanism.k_norm.weight", "self_attn.k_norm.weight"),
              ("attention.proj.weight", "self_attn.o_proj.weight")]  # fmt: skip


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """Qwen3-Next's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, SIZES, config_json)
    linear = positive_ints(hf, LINEAR, config_json)
    _check_qwen3_next(hf, sizes, linear, config_json)
    types = named_layer_types(hf, sizes["num_hidden_layers"], KINDS, config_json)
    eps = float(hf.get("rms_norm_eps", 1e-6))
    kinds: dict[str, Any] = {}
    if "linear_attention" in types:
        kinds["linear"] = {
            "mixer": "gated_deltanet", "n_head": linear["linear_num_key_heads"],
            "expand_v": linear["linear_value_head_dim"] / linear["linear_key_head_dim"], "norm_eps": eps,
            "l2_eps": 1e-6,  # transformers' l2norm, flash-linear-attention's
        }  # fmt: skip
    if "full_attention" in types:
        rope = hf.get("rope_parameters") or {}
        position = {"kind": "rope", "base": float(rope.get("rope_theta", 10000.0)),
                    "fraction": float(rope.get("partial_rotary_factor", 0.25))}  # fmt: skip
        kinds["full"] = {"mixer": "attention", "position": position}
    gated = {"name": "gated_qknorm", "eps": eps, "over": "head", "gate_bias": False}
    tied = bool(hf.get("tie_word_embeddings"))
    return decoder_config(hf, sizes, [KINDS[t] for t in types], kinds, gated, activation="swiglu",
                          norm="gemma_rmsnorm", norm_place="pre", tie_embeddings=tied)  # fmt: skip


def _check_qwen3_next(hf: dict[str, Any], sizes: dict[str, int], linear: dict[str, int], config_json: Path) -> None:
    narrow = narrow_heads_problem(hf, sizes)
    problems = [
        (narrow is not None, narrow or ""),
        (linear["linear_num_key_heads"] * linear["linear_key_head_dim"] != sizes["hidden_size"],
         "linear_num_key_heads x linear_key_head_dim must be hidden_size: andrea's Gated DeltaNet keys are d_model "
         "wide so far"),
        (linear["linear_num_value_heads"] != linear["linear_num_key_heads"],
         "linear_num_value_heads differs from linear_num_key_heads; andrea's Gated DeltaNet has one value head a "
         "key head so far"),
        (linear["linear_conv_kernel_dim"] != 4, "linear_conv_kernel_dim must be 4, andrea's short convolution"),
        (sorted(hf.get("mlp_only_layers") or []) != list(range(sizes["num_hidden_layers"]))
         and hf.get("num_experts", 0) > 0,
         f"mlp_only_layers={hf.get('mlp_only_layers')!r}; andrea reads Qwen3-Next's dense layers only (give a "
         "folder whose mlp_only_layers names every layer)"),
        (hf.get("hidden_act", "silu") != "silu" or bool(hf.get("attention_bias")),
         "hidden_act silu and no attention_bias are Qwen3-Next as andrea builds it"),
    ]  # fmt: skip
    refuse_first(problems, config_json)


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """Qwen3-Next's tensors (by their Hugging Face names) under andrea's names, float32, fused projections split
    and the gated attention's QK-norm gains as 1 + w; a tensor that is not Qwen3-Next's, or one missing, is
    refused naming it."""
    return _state(tensors, n_layer, tied, where, gradients=False)


def gradients_of(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """As `state_dict`, for gradients: d/dw of 1 + w is d/dw."""
    return _state(tensors, n_layer, tied, where, gradients=True)


def _state(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str, gradients: bool) -> dict[str, Tensor]:
    split: dict[str, Tensor] = {}
    for i in range(n_layer):
        split |= _split_layer(tensors, f"model.layers.{i}.", f"blocks.{i}.attention.")
    read = {name: t for name, t in tensors.items() if name not in _fused(tensors)} | split
    names = _names(tensors, n_layer, tied) | {name: name for name in split}  # the split ones: andrea's already
    state = mapped(read, names, {}, FAMILY, where)
    if not gradients:  # the gated attention's QK-norm gains: Qwen3-Next's 1 + w as andrea's w
        state |= {n: 1.0 + t for n, t in state.items() if n.endswith(("q_norm.weight", "k_norm.weight"))}
    return state | ({"lm_head.weight": state["embed.token.weight"]} if tied else {})


def _names(tensors: dict[str, Tensor], n_layer: int, tied: bool) -> dict[str, str]:
    """The tensors read as they are: Qwen3-Next's name -> andrea's, each layer by its kind."""
    names = decoder_names(n_layer, tied, LAYER)
    for i in range(n_layer):
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
        kind = LINEAR_LAYER if f"{theirs}linear_attn.A_log" in tensors else FULL_LAYER
        names |= {f"{theirs}{t}": f"{ours}{o}" for o, t in kind}
    return names


def _fused(tensors: dict[str, Tensor]) -> set[str]:
    """The fused tensors `_split_layer` splits (they are read through their parts)."""
    ends = ("in_proj_qkvz.weight", "in_proj_ba.weight", "conv1d.weight", "self_attn.q_proj.weight",
            "self_attn.k_proj.weight", "self_attn.v_proj.weight")  # fmt: skip
    return {name for name in tensors if name.endswith(ends)}


def _split_layer(tensors: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    """One layer's fused projections split into andrea's tensors."""
    if f"{theirs}linear_attn.in_proj_qkvz.weight" in tensors:
        return _split_linear(tensors, theirs + "linear_attn.", ours)
    if f"{theirs}self_attn.q_proj.weight" in tensors:
        return _split_gated(tensors, theirs + "self_attn.", ours)
    return {}


def _split_linear(tensors: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    """Gated DeltaNet's fused projections: in_proj_qkvz holds, key head by key head, its q, k, v and z rows;
    in_proj_ba its b and a rows; conv1d's channels are q, k, v in order."""
    n_head = tensors[f"{theirs}A_log"].shape[0]
    b, a = tensors[f"{theirs}in_proj_ba.weight"].float().view(n_head, 2, -1).unbind(1)
    qkvz = tensors[f"{theirs}in_proj_qkvz.weight"].float()
    key = tensors[f"{theirs}conv1d.weight"].shape[0] - qkvz.shape[0] // 2  # conv: 2 K + V channels, qkvz: 2 K + 2 V
    key_dim, value_dim = key // n_head, (qkvz.shape[0] // 2 - key) // n_head
    q, k, v, z = qkvz.view(n_head, -1, qkvz.shape[1]).split([key_dim, key_dim, value_dim, value_dim], dim=1)
    conv = tensors[f"{theirs}conv1d.weight"].float().split([key, key, value_dim * n_head])
    parts = {"q_proj": q, "k_proj": k, "v_proj": v, "gate": z, "b_proj": b, "a_proj": a}
    out = {f"{ours}{name}.weight": t.reshape(-1, qkvz.shape[1]).contiguous() for name, t in parts.items()}
    return out | {f"{ours}convs.{name}.weight": t.contiguous() for name, t in zip("qkv", conv, strict=True)}


def _split_gated(tensors: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    """Gated attention's q_proj holds, head by head, the query's rows then the gate's."""
    head_dim = tensors[f"{theirs}q_norm.weight"].shape[0]
    q_proj = tensors[f"{theirs}q_proj.weight"].float()
    query, gate = q_proj.view(-1, 2, head_dim, q_proj.shape[1]).unbind(1)
    width = q_proj.shape[1]
    qkv = torch.cat((query.reshape(-1, width), tensors[f"{theirs}k_proj.weight"].float(),
                     tensors[f"{theirs}v_proj.weight"].float()))  # fmt: skip
    return {f"{ours}qkv.weight": qkv, f"{ours}mechanism.gate.weight": gate.reshape(-1, width).contiguous()}


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict)


def load_qwen3_next(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A Qwen3-Next (dense) folder -> an ANDREA GPT in eval mode holding its weights, and its net config."""
    return READER.load(folder, device)
