"""What the decoder families andrea reads in share (andrea.models.files.olmo3, gemma3): their layer types as
andrea's attention kinds, their sizes and settings as an andrea net config, and their tensors' names mapped onto
andrea's, q, k and v stacked into the fused projection. Every refusal is one line naming the file (HFFolderError).
And the way back, for the export (andrea.models.files.family_export): an andrea network's layers as layer types,
its config as the config.json every decoder family shares, its fused projection split into q, k and v.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from andrea.attention.registry import as_mask
from andrea.models.files.hf_folder import HFFolderError, positive_ints

if TYPE_CHECKING:
    from andrea.mixers.layer_spec import LayerSpec

KINDS = {"sliding_attention": "sliding", "full_attention": "full"}  # a config's layer_types -> andrea's kind names


def layer_types(hf: dict[str, Any], n_layer: int, every: int, config_json: Path) -> list[str]:
    """Each layer's type (config.json's layer_types); without them, the family's default: every `every`-th layer
    full attention, the rest a sliding window."""
    types = hf.get("layer_types") or [
        "full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n_layer)
    ]
    if not isinstance(types, list) or len(types) != n_layer or not set(types) <= set(KINDS):
        raise HFFolderError(f"{config_json}: layer_types must name {n_layer} layers, each one of {', '.join(KINDS)}")
    return types


def named_layer_types(hf: dict[str, Any], n_layer: int, kinds: dict[str, str], config_json: Path) -> list[str]:
    """Each layer's type, config.json's layer_types, every one a key of `kinds` (a family of two mixers)."""
    types = hf.get("layer_types")
    if not isinstance(types, list) or len(types) != n_layer or not set(types) <= set(kinds):
        raise HFFolderError(f"{config_json}: layer_types must name {n_layer} layers, each one of {', '.join(kinds)}")
    return types


def refuse_first(problems: list[tuple[bool, str]], config_json: Path) -> None:
    """The first (failed, problem) that failed, as one line naming config.json (HFFolderError)."""
    for failed, problem in problems:
        if failed:
            raise HFFolderError(f"{config_json}: {problem}")


def narrow_heads_problem(hf: dict[str, Any], sizes: dict[str, int]) -> str | None:
    """Why a reader that builds heads d_model / n_head wide cannot read config.json's head_dim, or None (Gemma 3's
    reader reads other widths: heads.head_dim)."""
    width = sizes["hidden_size"] // sizes["num_attention_heads"]
    if hf.get("head_dim", width) == width:
        return None
    return (
        f"head_dim={hf.get('head_dim')} differs from hidden_size / num_attention_heads = {width}; andrea's heads "
        "are d_model / n_head wide so far"
    )


def attention_kind(hf: dict[str, Any], layer_type: str, default_base: float, config_json: Path) -> dict[str, Any]:
    """A layer type as an andrea attention kind: RoPE at its own rope_theta (the default kind of RoPE only), and a
    sliding layer's causal window of `sliding_window` tokens (a query sees itself and the window - 1 before)."""
    rope = (hf.get("rope_parameters") or {}).get(layer_type) or {}
    if rope.get("rope_type", "default") != "default":
        raise HFFolderError(
            f"{config_json}: rope_parameters.{layer_type}.rope_type={rope['rope_type']!r}; andrea reads the "
            "default RoPE only so far"
        )
    base = float(rope.get("rope_theta", default_base))
    kind: dict[str, Any] = {"mixer": "attention", "position": {"kind": "rope", "base": base}}
    if layer_type == "sliding_attention":
        window = positive_ints(hf, ("sliding_window",), config_json)["sliding_window"]
        kind["mask"] = {"name": "sliding_window", "window": window, "causal": True}
    return kind


def mapped(
    tensors: dict[str, Tensor], names: dict[str, str], qkv: dict[str, list[str]], family: str, where: str
) -> dict[str, Tensor]:
    """Tensors under their Hugging Face names -> andrea's (float32): `names` one to one, `qkv` andrea's fused
    projection from its q, k and v in order (rows: every query head, every key head, every value head). A tensor
    that is not the family's, or one missing, is refused naming it."""
    stacked = {name for parts in qkv.values() for name in parts}
    unknown, missing = sorted(set(tensors) - set(names) - stacked), sorted((set(names) | stacked) - set(tensors))
    if unknown or missing:
        name, what = (unknown[0], "is not part of") if unknown else (missing[0], "is missing from")
        raise HFFolderError(f"{where}: tensor {name!r} {what} {family} as its config.json describes it")
    out = {ours: tensors[theirs].float().contiguous() for theirs, ours in names.items()}
    return out | {ours: torch.cat([tensors[name].float() for name in parts]) for ours, parts in qkv.items()}


def attention_projections(n_layer: int, prefix: str = "model.layers") -> dict[str, list[str]]:
    """andrea's fused qkv of each layer <- the layer's q_proj, k_proj and v_proj (self_attn)."""
    return {
        f"blocks.{i}.attention.qkv.weight": [f"{prefix}.{i}.self_attn.{p}_proj.weight" for p in "qkv"]
        for i in range(n_layer)
    }


SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "max_position_embeddings")  # fmt: skip  # what every decoder family's config.json sizes
QK_NORMS = [("attention.mechanism.q_norm", "self_attn.q_norm"), ("attention.mechanism.k_norm", "self_attn.k_norm")]
DECODER_LAYER = [  # (andrea's module in blocks.<i>, the families' in model.layers.<i>) every decoder family has
    ("attention.proj", "self_attn.o_proj"),
    ("ln_1_post", "post_attention_layernorm"),
    ("mlp.fc", "mlp.up_proj"),
    ("mlp.gate", "mlp.gate_proj"),
    ("mlp.proj", "mlp.down_proj"),
    ("ln_2_post", "post_feedforward_layernorm"),
]


def decoder_config(
    hf: dict[str, Any], sizes: dict[str, int], layout: list[str], kinds: dict[str, Any], mechanism: dict[str, Any],
    **parts: Any,
) -> dict[str, Any]:  # fmt: skip
    """An andrea net config of a decoder family: its sizes (SIZES), RoPE, its layer kinds in the pattern `layout`
    (their names, layer by layer), each attention kind (and the network's attention) with `mechanism` unless the
    kind has its own (a kind of another mixer has its own settings); `parts` the family's own GPT settings (norm,
    norm_place, activation, ...)."""
    n_head = sizes["num_attention_heads"]
    return {
        "_target_": "andrea.models.gpt.GPT",
        "vocab_size": sizes["vocab_size"],
        "max_context": sizes["max_position_embeddings"],
        "n_layer": sizes["num_hidden_layers"],
        "d_model": sizes["hidden_size"],
        "d_mlp": sizes["intermediate_size"],
        "position": "rope",
        "norm_eps": float(hf.get("rms_norm_eps", 1e-6)),
        **parts,
        "attention": {
            "n_head": n_head,
            "n_kv_head": hf.get("num_key_value_heads") or n_head,
            "backend": "sdpa",
            "mask": "causal",
            "mechanism": mechanism,
        },  # fmt: skip
        "kinds": {
            name: ({"mechanism": mechanism} if kind.get("mixer") == "attention" else {}) | kind
            for name, kind in kinds.items()
        },  # fmt: skip
        "layout": layout,
    }


def decoder_names(n_layer: int, tied: bool, layer: list[tuple[str, str]]) -> dict[str, str]:
    """A decoder family's tensor names -> andrea's: the embedding, the final norm, the LM head where it is its own,
    and each layer's `layer` table (andrea's module, the family's)."""
    names = {"model.embed_tokens.weight": "embed.token.weight", "model.norm.weight": "ln_f.weight"}
    names |= {} if tied else {"lm_head.weight": "lm_head.weight"}
    return names | layer_names(n_layer, layer)


def layer_names(n_layer: int, layer: list[tuple[str, str]]) -> dict[str, str]:
    """Each layer's weights in the `layer` table (andrea's module in blocks.<i>, the family's in model.layers.<i>):
    the family's name -> andrea's."""
    return {f"model.layers.{i}.{theirs}.weight": f"blocks.{i}.{ours}.weight" for i in range(n_layer)
            for ours, theirs in layer}  # fmt: skip


def decoder_tensors(
    tensors: dict[str, Tensor], n_layer: int, tied: bool, layer: list[tuple[str, str]], family: str, where: str
) -> dict[str, Tensor]:
    """A decoder family's tensors under andrea's names (decoder_names, q, k and v stacked), a tied LM head the
    embedding itself; refused as `mapped` refuses."""
    out = mapped(tensors, decoder_names(n_layer, tied, layer), attention_projections(n_layer), family, where)
    return out | ({"lm_head.weight": out["embed.token.weight"]} if tied else {})


def types_of(specs: tuple[LayerSpec, ...]) -> tuple[list[str], int | None, dict[str, float]]:
    """Each layer's type (a causal window: sliding_attention; else full_attention), the window, and each type's
    RoPE base; ValueError where the layers are not a decoder family's (another mixer, two windows)."""
    types, windows, bases = [], set(), {}
    for spec in specs:
        if not spec.attention:
            raise ValueError(f"layer {spec.index} is {spec.mixer}")
        lookback = as_mask(spec.settings["mask"]).max_lookback
        kind = "full_attention" if lookback is None else "sliding_attention"
        windows |= set() if lookback is None else {lookback}
        types.append(kind)
        bases[kind] = float(spec.settings["rope_base"])
    if len(windows) > 1:
        raise ValueError("sliding layers of different windows")
    return types, next(iter(windows), None), bases


def decoder_hf_config(config: dict[str, Any], specs: tuple[LayerSpec, ...], model_type: str, architecture: str
                      ) -> dict[str, Any]:  # fmt: skip
    """What every decoder family's config.json says of an andrea net config (its family adds its own keys)."""
    types, window, bases = types_of(specs)
    first = specs[0].settings
    return {
        "model_type": model_type,
        "architectures": [architecture],
        "vocab_size": config["vocab_size"],
        "hidden_size": config["d_model"],
        "intermediate_size": config.get("d_mlp") or config.get("mlp_ratio", 4) * config["d_model"],
        "num_hidden_layers": config["n_layer"],
        "num_attention_heads": first["n_head"],
        "num_key_value_heads": first.get("n_kv_head") or first["n_head"],
        "max_position_embeddings": config["max_context"],
        "rms_norm_eps": config["norm_eps"],
        "layer_types": types,
        "sliding_window": window,
        "rope_parameters": {kind: {"rope_type": "default", "rope_theta": base} for kind, base in bases.items()},
        "tie_word_embeddings": bool(config.get("tie_embeddings", True)),
        "attention_bias": False,
        "torch_dtype": "float32",
    }


def split_back(names: dict[str, str], heads: tuple[int, int], state: dict[str, Tensor]) -> dict[str, Tensor]:
    """andrea's tensors under a family's names (`names`: theirs -> ours), the fused qkv split into q, k and v."""
    n_head, n_kv_head = heads
    out = {theirs: state[ours].detach().float().cpu().contiguous() for theirs, ours in names.items()}
    for ours in (name for name in state if name.endswith("attention.qkv.weight")):
        layer = ours.split(".")[1]
        qkv = state[ours].detach().float().cpu()
        head_dim = qkv.shape[0] // (n_head + 2 * n_kv_head)
        q, k, v = qkv.split([n_head * head_dim, n_kv_head * head_dim, n_kv_head * head_dim])
        for part, tensor in zip("qkv", (q, k, v), strict=True):
            out[f"model.layers.{layer}.self_attn.{part}_proj.weight"] = tensor.contiguous()
    return out
