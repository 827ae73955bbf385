"""An ANDREA GPT as a Hugging Face GPT-2 folder (`andrea-export <ckpt> <folder> --format hf`): config.json,
model.safetensors under GPT-2's names, generation_config.json and, for a model of GPT-2's tokens, the tokenizer's
files. `transformers.AutoModelForCausalLM.from_pretrained(folder)` loads it with andrea's logits, and
TransformerLens's bridge boots from it.

GPT-2's architecture holds an ANDREA GPT with learned positions, attention in every layer, MHA heads, softmax,
the causal mask and a GELU (exact or tanh) or ReLU MLP of mlp_ratio · d_model; LayerNorm (eps 1e-5) before each
sub-layer and a tied LM head it always has, its embeddings unscaled and its logits uncapped. A model
without biases (bias=false) is written with zero biases, which compute the same. Anything else is refused in
one line naming what does not fit. The inverse of andrea.models.files.gpt2's import, name for name. A network that
GPT-2 does not hold but OLMo 3 or Gemma 3 does is written as a folder of that family
(andrea.models.files.family_export).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from andrea.attention.heads import HeadConfig
from andrea.models.files import gpt2
from andrea.utils.files import staged

ACTIVATION_FUNCTIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}  # ours -> GPT2Config's
ONE_KIND = "none (every layer of one kind)"
EOT = 50256  # GPT-2's <|endoftext|>


def does_not_fit(config: dict[str, Any]) -> str | None:
    """What of an andrea net config GPT-2's architecture cannot hold, or None."""
    attention = config.get("attention") or {}
    layout = config.get("layout") or [str((config.get("mixer") or {}).get("name", "attention"))]
    found = {
        "the model": (config.get("_target_"), "andrea.models.gpt.GPT"),
        "position": (config.get("position"), "learned"),
        "mechanism": (_name(attention.get("mechanism"), "softmax"), "softmax"),
        "mask": (_name(attention.get("mask"), "causal"), "causal"),
        "selection": (_name(attention.get("selection"), "none"), "none"),
        "heads": ("mla" if attention.get("latent") else _kind(attention), "mha"),
        "layers": (",".join(sorted(set(layout))), "attention"),
        "model.net.kinds": (_kinds(config), ONE_KIND),
    } | _parts(config)
    for what, (value, wanted) in found.items():
        if value != wanted:
            return f"{what} is {value}; GPT-2's architecture holds {wanted} only"
    if config.get("activation", "gelu") not in ACTIVATION_FUNCTIONS:
        return f"activation is {config.get('activation')}; GPT-2 takes {', '.join(ACTIVATION_FUNCTIONS)}"
    return None


def _parts(config: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The GPT's parts GPT-2's architecture fixes: {what: (the config's, GPT-2's)}."""
    return {
        "norm": (f"{config.get('norm', 'layernorm')} {config.get('norm_place', 'pre')}", "layernorm pre"),
        "norm_eps": (config.get("norm_eps", 1e-5), 1e-5),
        "d_mlp": (config.get("d_mlp"), None),
        "the LM head": ("tied" if config.get("tie_embeddings", True) else "untied", "tied"),
        "embed_scale": (bool(config.get("embed_scale")), False),
        "logit_softcap": (config.get("logit_softcap"), None),
        "readout": (config.get("readout", "next_token"), "next_token"),
    }


def _name(part: Any, default: str) -> str:
    """A mechanism's or mask's name, whether the config gives it as a name (or an expression) or a mapping."""
    return part if isinstance(part, str) else str((part or {}).get("name", default))


def _kinds(config: dict[str, Any]) -> str:
    """The named layer kinds (GPT-2's layers are all of one kind)."""
    return ", ".join(sorted(config.get("kinds") or {})) or ONE_KIND


def _kind(attention: dict[str, Any]) -> str:
    """mha, or the other kind (andrea.attention.heads.HeadConfig's word) with its head counts."""
    n_head = attention["n_head"]
    n_kv = attention.get("n_kv_head") or n_head
    kind = HeadConfig(n_head, n_kv).kind
    return kind if kind == "mha" else f"{kind} (n_kv_head={n_kv} of n_head={n_head})"


def write_folder(net: nn.Module, config: dict[str, Any], tokenizer: str | None, folder: Path) -> list[str]:
    """The Hugging Face folder; returns the names of the files written. ValueError where GPT-2 cannot hold it.
    The files are written aside and moved in once all are whole, so a write that fails leaves the folder as it
    was; an earlier export's tokenizer files that this one does not write are removed, so that the folder never
    offers a tokenizer whose ids are not the model's."""
    problem = does_not_fit(config)
    if problem:
        from andrea.models.files.family_export import fitting, write_family_folder

        found = fitting(config)
        if found is None:
            raise ValueError(f"--format hf: {problem}, and no other family andrea writes (OLMo 3, Gemma 3) holds it; "
                             "export it with andrea-export's own format (.safetensors)")  # fmt: skip
        return write_family_folder(net, config, *found, folder)
    with staged(folder) as staging:
        save_file(gpt2_tensors(net, config), str(staging / "model.safetensors"), metadata={"format": "pt"})
        (staging / "config.json").write_text(json.dumps(hf_config(config), indent=2))
        generation = {"bos_token_id": EOT, "eos_token_id": EOT} if tokenizer == gpt2.TOKENIZER else {}
        max_length = config["max_context"]
        (staging / "generation_config.json").write_text(json.dumps({**generation, "max_length": max_length}))
        written = ["config.json", "model.safetensors", "generation_config.json"]
        if tokenizer == gpt2.TOKENIZER:
            written += _tokenizer_files(staging, max_length)
    for name in set(TOKENIZER_FILES) - set(written):
        (folder / name).unlink(missing_ok=True)
    return written


def hf_config(config: dict[str, Any]) -> dict[str, Any]:
    """GPT2Config's values for an andrea net config that fits."""
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config["vocab_size"],
        "n_positions": config["max_context"],
        "n_embd": config["d_model"],
        "n_layer": config["n_layer"],
        "n_head": config["attention"]["n_head"],
        "n_inner": config.get("mlp_ratio", 4) * config["d_model"],
        "activation_function": ACTIVATION_FUNCTIONS[config.get("activation", "gelu")],
        "layer_norm_epsilon": 1e-5,  # torch's LayerNorm default, which andrea's keeps
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": EOT,
        "eos_token_id": EOT,
        "torch_dtype": "float32",
    }


def gpt2_tensors(net: nn.Module, config: dict[str, Any]) -> dict[str, Tensor]:
    """andrea's tensors under GPT-2's names, Linear weights transposed to Conv1D's layout, missing biases as 0."""
    ours = {name: tensor.detach().float().cpu() for name, tensor in net.state_dict().items()}
    tensors = {}
    for theirs, name in gpt2._our_names(config["n_layer"]).items():
        if name in ours:
            tensors[theirs] = ours[name]
        elif name.endswith(".bias"):  # bias=false: the bias of the weight beside it, zero
            weight = ours[name.removesuffix(".bias") + ".weight"]
            conv1d = any(k in theirs for k in ("c_attn", "c_proj", "c_fc"))
            tensors[theirs] = torch.zeros(weight.shape[0] if conv1d else weight.shape[-1])
        else:
            raise ValueError(f"--format hf: the network has no {name}")
    # into Conv1D's layout with the import's own transpose, which is its own inverse
    return {name: gpt2._as_linear(name, t).contiguous() for name, t in tensors.items()}


# The files transformers reads a tokenizer from: those an export of GPT-2's tokens writes, and a fast tokenizer's
# tokenizer.json and added_tokens.json, which it reads before them
TOKENIZER_FILES = (
    "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json",
    "added_tokens.json",
)  # fmt: skip


def _tokenizer_files(folder: Path, max_length: int) -> list[str]:
    """GPT-2's vocab.json and merges.txt (the encoder.json and vocab.bpe andrea's gpt2 tokenizer reads)."""
    from andrea.data.tokenizers import gpt2_files  # the checked files andrea's gpt2 tokenizer reads

    files = gpt2_files()
    shutil.copyfile(files / "encoder.json", folder / "vocab.json")
    shutil.copyfile(files / "vocab.bpe", folder / "merges.txt")
    special = "<|endoftext|>"
    settings = {
        "tokenizer_class": "GPT2Tokenizer", "model_max_length": max_length, "bos_token": special,
        "eos_token": special, "unk_token": special, "add_prefix_space": False,
    }  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    (folder / "special_tokens_map.json").write_text(
        json.dumps({k: special for k in ("bos_token", "eos_token", "unk_token")})
    )
    return ["vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"]
