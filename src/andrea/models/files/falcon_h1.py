"""Falcon-H1 as an ANDREA GPT (TII 2025; transformers' `falcon_h1`): a local Hugging Face folder (config.json +
model.safetensors) read as data (andrea.models.files.hf_folder), with no `transformers`.

    net, config = load_falcon_h1("falcon-h1/")

config.json becomes the net config of conf/model/falcon-h1.yaml's network: every layer one kind of two mixers side
by side, their outputs summed (andrea.mixers.parallel): `attention` (GQA, RoPE at `rope_theta`) and `ssm`
(Mamba-2: `mamba_n_heads` heads, `mamba_d_ssm` wide, a state of `mamba_d_state`, the short convolution with its
bias, the z gate, no RMSNorm); RMSNorm before the mixers and before the MLP, SwiGLU of `intermediate_size`, an untied
LM head, no biases. Tensors, name by name:

    model.embed_tokens, lm_head, model.final_layernorm   -> embed.token, lm_head, ln_f
    model.layers.<i>.input_layernorm, pre_ff_layernorm    -> blocks.<i>.ln_1, ln_2
    model.layers.<i>.self_attn.q_proj, k_proj, v_proj     -> blocks.<i>.attention.parts.attention.qkv (stacked)
    model.layers.<i>.self_attn.o_proj                     -> blocks.<i>.attention.parts.attention.proj
    model.layers.<i>.mamba.in_proj, conv1d, out_proj      -> blocks.<i>.attention.parts.ssm.in_proj, conv, proj
    model.layers.<i>.mamba.A_log, dt_bias, D              -> blocks.<i>.attention.parts.ssm.A_log, dt_bias, D
    model.layers.<i>.feed_forward.up_proj, gate_proj, down_proj -> blocks.<i>.mlp.fc, gate, proj

Falcon-H1's µP multipliers (embedding, LM head, attention in and out, key, SSM in, out and per stream, MLP) are
read at 1, transformers' defaults; a folder that sets one otherwise (the released checkpoints do) is refused in one
line naming it, as are Mamba-2 groups, a clamp on its step, or its RMSNorm: andrea builds none of them so far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from andrea.models.files.hf_decoder import SIZES, decoder_config, mapped, narrow_heads_problem
from andrea.models.files.hf_folder import Family, HFFolderError, positive_ints

FAMILY, MODEL_TYPE = "Falcon-H1", "falcon_h1"
MAMBA = ("mamba_n_heads", "mamba_d_ssm", "mamba_d_state", "mamba_d_head", "mamba_d_conv", "mamba_n_groups")
MULTIPLIERS = ("embedding_multiplier", "lm_head_multiplier", "attention_in_multiplier", "attention_out_multiplier",
               "key_multiplier", "ssm_in_multiplier", "ssm_out_multiplier")  # fmt: skip
PARTS = "attention.parts."
LAYER = [("ln_1.weight", "input_layernorm.weight"), ("ln_2.weight", "pre_ff_layernorm.weight"),
         ("mlp.fc.weight", "feed_forward.up_proj.weight"), ("mlp.gate.weight", "feed_forward.gate_proj.weight"),
         ("mlp.proj.weight", "feed_forward.down_proj.weight"),
         (f"{PARTS}attention.proj.weight", "self_attn.o_proj.weight"),
         (f"{PARTS}ssm.in_proj.weight", "mamba.in_proj.weight"), (f"{PARTS}ssm.conv.weight", "mamba.conv1d.weight"),
         (f"{PARTS}ssm.conv.bias", "mamba.conv1d.bias"), (f"{PARTS}ssm.proj.weight", "mamba.out_proj.weight"),
         (f"{PARTS}ssm.A_log", "mamba.A_log"), (f"{PARTS}ssm.dt_bias", "mamba.dt_bias"),
         (f"{PARTS}ssm.D", "mamba.D")]  # fmt: skip


def net_config(hf: dict[str, Any], config_json: Path) -> dict[str, Any]:
    """Falcon-H1's config.json (a mapping) -> an andrea net config, or HFFolderError naming the key."""
    sizes = positive_ints(hf, SIZES, config_json)
    mamba = positive_ints(hf, MAMBA, config_json)
    _check_falcon_h1(hf, sizes, mamba, config_json)
    rope = hf.get("rope_parameters") or {}
    ssm = {"mixer": "mamba2", "n_head": mamba["mamba_n_heads"], "expand": mamba["mamba_d_ssm"] // sizes["hidden_size"],
           "d_state": mamba["mamba_d_state"], "norm": False}  # fmt: skip
    attention = {"mixer": "attention", "position": {"kind": "rope", "base": float(rope.get("rope_theta", 1e11))}}
    kinds = {"hybrid": {"parallel": {"attention": attention, "ssm": ssm}}}
    return decoder_config(hf, sizes, ["hybrid"] * sizes["num_hidden_layers"], kinds, {"name": "softmax"},
                          activation="swiglu", norm="rmsnorm", norm_place="pre",
                          tie_embeddings=bool(hf.get("tie_word_embeddings")))  # fmt: skip


def _check_falcon_h1(hf: dict[str, Any], sizes: dict[str, int], mamba: dict[str, int], config_json: Path) -> None:
    """What andrea builds of Falcon-H1, each other setting refused in one line naming it."""
    for failed, problem in _problems(hf, sizes, mamba):
        if failed:
            raise HFFolderError(f"{config_json}: {problem}")


def _problems(hf: dict[str, Any], sizes: dict[str, int], mamba: dict[str, int]) -> list[tuple[bool, str]]:
    narrow = narrow_heads_problem(hf, sizes)
    multiplied = _multiplied(hf)
    rope = (hf.get("rope_parameters") or {}).get("rope_type", "default")
    return [
        (bool(multiplied), f"{multiplied[0] if multiplied else ''} is not 1; andrea reads Falcon-H1 with its µP "
         "multipliers at 1 (transformers' defaults) so far"),
        (narrow is not None, narrow or ""),
        (mamba["mamba_d_ssm"] != mamba["mamba_n_heads"] * mamba["mamba_d_head"]
         or mamba["mamba_d_ssm"] % sizes["hidden_size"] != 0,
         "mamba_d_ssm must be mamba_n_heads x mamba_d_head, and a multiple of hidden_size (andrea's mixer.expand)"),
        (mamba["mamba_n_groups"] != 1 or mamba["mamba_d_conv"] != 4 or hf.get("mamba_conv_bias") is False,
         "andrea's Mamba-2 has one group of B and C and a convolution of kernel 4 with a bias"),
        (bool(hf.get("mamba_rms_norm")) or _clamped(hf),
         "andrea's Mamba-2 in Falcon-H1 has no RMSNorm (mamba_rms_norm) and no clamp on its step (time_step_limit)"),
        (any(hf.get(key) for key in ("attention_bias", "mlp_bias", "mamba_proj_bias", "projectors_bias")),
         "no biases are Falcon-H1 as andrea builds it"),
        (rope != "default", f"rope_parameters.rope_type={rope!r}; andrea reads the default RoPE only so far"),
    ]  # fmt: skip


def _multiplied(hf: dict[str, Any]) -> list[str]:
    """The µP multipliers config.json sets to other than 1."""
    scalars = [key for key in MULTIPLIERS if hf.get(key, 1.0) != 1.0]
    return scalars + [key for key in ("mlp_multipliers", "ssm_multipliers") if set(hf.get(key) or [1.0]) != {1.0}]


def _clamped(hf: dict[str, Any]) -> bool:
    """Whether time_step_limit clamps Mamba-2's step (transformers' default, (0, inf), does not; JSON writes the
    infinity as a mapping)."""
    low, high = (hf.get("time_step_limit") or [0.0, None])[:2]
    return low != 0 or not (high is None or isinstance(high, dict) or high == float("inf"))


def state_dict(tensors: dict[str, Tensor], n_layer: int, tied: bool, where: str) -> dict[str, Tensor]:
    """Falcon-H1's tensors (by their Hugging Face names) under andrea's names, float32; a tensor that is not
    Falcon-H1's, or one missing, is refused naming it. Gradients map the same way."""
    names = {"model.embed_tokens.weight": "embed.token.weight", "model.final_layernorm.weight": "ln_f.weight"}
    names |= {} if tied else {"lm_head.weight": "lm_head.weight"}
    names |= {f"model.layers.{i}.{theirs}": f"blocks.{i}.{ours}" for i in range(n_layer) for ours, theirs in LAYER}
    qkv = {f"blocks.{i}.{PARTS}attention.qkv.weight": [f"model.layers.{i}.self_attn.{p}_proj.weight" for p in "qkv"]
           for i in range(n_layer)}  # fmt: skip
    read = {name: t for name, t in tensors.items() if not name.endswith("mup_vector")}  # 1s: multipliers at 1
    out = mapped(read, names, qkv, FAMILY, where)
    return out | ({"lm_head.weight": out["embed.token.weight"]} if tied else {})


READER = Family(FAMILY, MODEL_TYPE, net_config, state_dict)


def load_falcon_h1(folder: str | Path, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """A Falcon-H1 folder (its multipliers at 1) -> an ANDREA GPT in eval mode holding its weights, and its net
    config."""
    return READER.load(folder, device)
