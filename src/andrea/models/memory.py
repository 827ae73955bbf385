"""Memory a network will need, estimated from its config before anything is allocated.

    training   16 bytes per parameter (fp32 weights, gradients, AdamW's two moments)
               + activations kept for backward, per token: ~16·d_model per layer (GPT; 6 for the
                 toy model), 2·n_head·T more where the backend materialises the scores, and
                 3·vocab for the logits and their gradient (4 bytes each)
               + a recurrent mixer's states kept for backward: its state (CacheSize.per_sequence) once per
                 chunk of T and once more, per row
               + the attention maps callback's probe: every layer's (rows, H, T, T) weights at once
               + the static mask every attention layer keeps (max_context² booleans), and while
                 one is made, 16 bytes per max_context² for each mask it combines (index grids)
    loading    4 bytes per parameter + the mask buffers

An estimate, not a measurement: it errs high on activations, so it refuses only what
cannot fit (a run of 10⁵ widths, a context of 10⁹), never a run that would.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from torch import nn

from andrea.mixers.base import TokenMixer
from andrea.models.mixer_sizes import count, mixer_layers
from andrea.models.mlp import GATED

if TYPE_CHECKING:
    from andrea.models.files.schema import NetSpec

GiB = 1024**3
MATERIALISING_BACKENDS = ("naive", "eager")  # they hold (B, H, T, T) scores and weights
# What a "large" value of each key is (ANDREA-120M on a big batch), to name the key that overshoots most.
REFERENCE = {
    "d_model": 768,
    "n_layer": 12,
    "vocab_size": 50257,
    "max_context": 1024,
    "batch_size": 512,
    "seq_len": 1024,
}


@dataclass(frozen=True)
class Estimate:
    parameters: int
    state_bytes: int  # weights (+ gradients and optimizer state when training)
    activation_bytes: int
    mask_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.activation_bytes + self.mask_bytes

    def describe(self) -> str:
        return (
            f"about {size_text(self.total_bytes)} ({count_text(self.parameters)} parameters: "
            f"{size_text(self.state_bytes)} of weights"
            f"{', gradients and AdamW state' if self.activation_bytes else ''}"
            f"{f'; {size_text(self.activation_bytes)} of activations' if self.activation_bytes else ''}"
            f"{f'; {size_text(self.mask_bytes)} of mask buffers' if self.mask_bytes > GiB else ''})"
        )


def training(spec: NetSpec, batch_size: int, seq_len: int, probe_rows: int = 0) -> Estimate:
    """`probe_rows`: rows the attention maps callback runs through the model with weights returned."""
    mixers, f = mixer_layers(spec), spec.fields
    n = parameters(spec, mixers)
    d_model, n_layer = f["d_model"], len(spec.layers)
    per_layer = (16 if spec.is_gpt else 6) * d_model
    if spec.layer and spec.layer.backend in MATERIALISING_BACKENDS:
        per_layer += 2 * spec.n_head * seq_len
    per_token = n_layer * per_layer + 3 * f["vocab_size"] + 2 * d_model
    states = sum(_states(mixer, seq_len) for mixer in mixers if mixer is not None)  # per row
    heads = max((layer.n_head or 0 for layer in spec.layers), default=0)  # the maps' grid: one count in all
    probe = n_layer * probe_rows * heads * seq_len * seq_len
    activations = batch_size * (seq_len * per_token + states) + probe
    return Estimate(n, 16 * n, 4 * activations, _mask_bytes(spec))


def _states(mixer: nn.Module, seq_len: int) -> int:
    """The numbers a recurrent mixer keeps for backward in one row: its state at each chunk's start and end (a
    chunk of steps: a mixer that takes several a token says how many, `steps_per_token`)."""
    chunk, steps = getattr(mixer, "chunk", None), seq_len * getattr(mixer, "steps_per_token", 1)
    chunks = -(-steps // chunk) if isinstance(chunk, int) and chunk > 0 else steps
    return (chunks + 1) * cast(TokenMixer, mixer).cache_size().per_sequence


def loading(spec: NetSpec) -> Estimate:
    n = parameters(spec)
    return Estimate(n, 4 * n, 0, _mask_bytes(spec))


def _mask_bytes(spec: NetSpec) -> int:
    """Each attention layer's (L, L) buffer, and the masks' own dense forms."""
    attention = sum(layer.attention for layer in spec.layers)
    if not attention:
        return 0
    area = spec.fields["max_context"] ** 2
    return attention * area + 16 * area * max(spec.mask_terms, 1)


def available(device: str = "cpu") -> int:
    """Bytes of memory on `device`: the GPU's, or the machine's (a container's limit if lower)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        total = min(total, int(limit)) if limit.isdigit() else total
    except OSError:
        pass
    return total


def too_big(
    need: Estimate, values: dict[str, int], keys: dict[str, str], device: str, doing: str,
    grown: dict[str, tuple[float, float]] | None = None,
) -> str | None:  # fmt: skip
    """None when `need` fits the memory of `device`; else the start of a one-line refusal naming the key
    to lower: `key=value: <doing> needs about ..., more than the ... of memory on <device>`."""
    have = available(device)
    if need.total_bytes <= have:
        return None
    over = f"more than the {size_text(have)} of memory on {device}"
    return f"{culprit(need, values, keys, grown or {})}: {doing} needs {need.describe()}, {over}"


def culprit(
    estimate: Estimate, values: dict[str, int], keys: dict[str, str], grown: dict[str, tuple[float, float]]
) -> str:
    """`key=value` of the setting that makes the estimate too big: among the ones behind its largest
    part, the one furthest above its reference size (a mixer's size: above its default, `grown`). `keys` maps
    d_model, ... to config keys."""
    parts = {"state": estimate.state_bytes, "activations": estimate.activation_bytes, "masks": estimate.mask_bytes}
    largest = max(parts, key=lambda part: parts[part])
    candidates = {
        "state": ("d_model", "n_layer", "vocab_size"),
        "activations": ("batch_size", "seq_len", "n_layer", "vocab_size", "d_model"),
        "masks": ("max_context", "n_layer"),
    }[largest]
    sizes: dict[str, tuple[float, float]] = {
        name: (values[name], REFERENCE[name]) for name in candidates if name in values and name in keys
    }
    if largest != "masks":  # a mixer's sizes grow its weights and its states
        sizes |= grown
    name = max(sizes, key=lambda k: sizes[k][0] / sizes[k][1])
    return f"{keys.get(name, name)}={sizes[name][0]}"


def size_text(n: int) -> str:
    for unit, scale in (("EiB", 1024**6), ("PiB", 1024**5), ("TiB", 1024**4), ("GiB", GiB), ("MiB", 1024**2)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.1f} KiB"


def count_text(n: int) -> str:
    for unit, scale in (("billion", 1e9), ("million", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,}"


def parameters(spec: NetSpec, mixers: list[nn.Module | None] | None = None) -> int:
    """The network's parameter count, from its config alone (tests check it against the built model). `mixers`:
    mixer_layers(spec), where the caller has built them already."""
    f = spec.fields
    vocab, context, d_model, n_layer = f["vocab_size"], f["max_context"], f["d_model"], f["n_layer"]
    positions = context * d_model if f["position"] == "learned" else 0
    if not spec.layers:  # the toy model's ablation: no blocks at all
        return vocab * d_model + positions + 2 * d_model + vocab * d_model
    attention = _attention_parameters(spec) if spec.layer else 0  # a layer of the network's own attention
    layers = mixer_layers(spec) if mixers is None else mixers
    mixed = sum(attention if mixer is None else count(mixer) for mixer in layers)  # every layer's own mixer
    if not spec.is_gpt:  # LayerNorm with bias before each block and at the end, untied LM head
        return vocab * d_model + positions + n_layer * 2 * d_model + mixed + 2 * d_model + vocab * d_model
    head = 0 if f.get("tie_embeddings", True) else vocab * d_model  # a tied LM head is the embedding
    return vocab * d_model + positions + n_layer * _block_parameters(f) + mixed + _norm_parameters(f) + head


def _block_parameters(f: dict[str, Any]) -> int:
    """A GPT block's MLP (plain: fc and proj; gated: and the gate) and norms (two before, after, or both)."""
    d_model, bias = f["d_model"], bool(f.get("bias"))
    width = f.get("d_mlp") or f["mlp_ratio"] * d_model
    matrices = 3 if f.get("activation") in GATED else 2
    mlp = matrices * d_model * width + (((matrices - 1) * width + d_model) if bias else 0)
    norms = 4 if f.get("norm_place", "pre") == "both" else 2
    return mlp + norms * _norm_parameters(f)


def _norm_parameters(f: dict[str, Any]) -> int:
    """One norm's: a gain (and LayerNorm's bias, with model.net.bias); none for norm=none."""
    norm = f.get("norm", "layernorm")
    if norm == "none":
        return 0
    return f["d_model"] * (2 if norm == "layernorm" and f.get("bias") else 1)


def _attention_parameters(spec: NetSpec) -> int:
    """One attention layer of the network's attention: the Q, K, V projections, W_O and the mechanism's own."""
    d_model = spec.fields["d_model"]
    assert spec.layer is not None
    head_dim = spec.layer.width
    w_o = spec.n_head * head_dim * d_model + (d_model if spec.fields.get("bias") else 0)
    attention = _projection_parameters(spec, head_dim) + w_o
    sizes = dict(n_head=spec.n_head, n_kv_head=spec.n_kv_head, head_dim=head_dim, d_model=d_model)
    return attention + _mechanism_parameters(spec, sizes)


def _projection_parameters(spec: NetSpec, head_dim: int) -> int:
    """The fused QKV projection's weights, or latent attention's projections (counted on the meta device)."""
    import torch

    from andrea.attention.latent import LatentAttention

    assert spec.layer is not None
    d_model, latent = spec.fields["d_model"], spec.layer.latent
    if latent is None:  # and its bias, with model.net.bias
        return (d_model + bool(spec.fields.get("bias"))) * (spec.n_head + 2 * spec.n_kv_head) * head_dim
    rope = spec.fields.get("position") == "rope"
    try:
        with torch.device("meta"):
            projections = LatentAttention(
                d_model, spec.n_head, head_dim, **latent, rope=rope, bias=bool(spec.fields.get("bias"))
            )
    except (TypeError, ValueError):  # refused by name when the network builds
        return 0
    return sum(p.numel() for p in projections.parameters())


def _mechanism_parameters(spec: NetSpec, sizes: dict[str, int]) -> int:
    """One layer's mechanism parameters (a gate, a sink logit per head, λ, norms), counted on a mechanism
    built on the meta device: nothing allocated, and a plugin's mechanism counted like ours."""
    import torch

    from andrea.attention.registry import as_mechanism

    assert spec.layer is not None
    sizes = sizes | dict(max_context=spec.fields["max_context"], n_layer=spec.fields["n_layer"])
    sizes |= dict(projection_bias=bool(spec.fields.get("bias")))
    try:
        with torch.device("meta"):
            mechanism = as_mechanism(spec.layer.mechanism, sizes)
    except ValueError:  # a setting the network refuses by name when it builds: nothing to count yet
        return 0
    return sum(p.numel() for p in mechanism.parameters())
