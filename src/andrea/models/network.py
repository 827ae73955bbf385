"""What andrea's tools read from a network: GPT, ToyModel, or a user's model of the same shape.

torch types every attribute of an nn.Module as `Tensor | Module`; `network(net)` states
instead what a network of the zoo holds, for the code that reads it (sampling, training).
Which layers are attention is read from each layer's spec (`net.layer_specs`, andrea.mixers.layer_spec),
never asked of the layer itself: `attention_of(net)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from torch import Tensor, nn

from andrea.attention.block import MultiHeadSelfAttention

if TYPE_CHECKING:
    from andrea.core.hook_points import HookPoint
    from andrea.mixers import LayerSpec, MixerCache, TokenMixer


class Network(Protocol):
    vocab_size: int
    max_context: int

    @property
    def layer_specs(self) -> Sequence[LayerSpec]:
        """Each layer's kind, mixer and settings, first to last (andrea.mixers.layer_spec)."""
        ...

    @property
    def mixers(self) -> Sequence[TokenMixer]:
        """Every layer's token mixer, first to last (andrea.mixers.base)."""
        ...

    @property
    def attention(self) -> Sequence[MultiHeadSelfAttention]:
        """Every layer's attention, first to last, for the tools that read heads (`attention_layers`)."""
        ...

    def new_cache(self) -> list[MixerCache]: ...

    def hook_points(self) -> dict[str, HookPoint]:
        """Every activation the lens can read or edit, by its name (docs/lens.md), in forward order."""
        ...

    def unembed(self, x: Tensor) -> Tensor:
        """(..., D) a residual stream -> logits (..., V), as the network reads its last one (the logit lens)."""
        ...

    def __call__(
        self, idx: Tensor, return_weights: bool = False, cache: list[MixerCache] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """idx (B, T) -> logits (B, T, V) and, when asked, one (B, H, T, S) weight tensor per layer."""
        ...


def attention_of(net: Network) -> list[MultiHeadSelfAttention | None]:
    """Each layer's attention, first to last, or None for a layer of another mixer (as its spec says)."""
    return [
        cast(MultiHeadSelfAttention, mixer) if spec.attention else None
        for spec, mixer in zip(net.layer_specs, net.mixers, strict=True)
    ]


def attention_layers(net: Network) -> list[MultiHeadSelfAttention]:
    """The layers' mixers as attention, for a tool that reads heads; a layer with another mixer is refused."""
    layers = attention_of(net)
    for layer, (spec, attention) in enumerate(zip(net.layer_specs, layers, strict=True)):
        if attention is None:
            raise ValueError(
                f"layer {layer} mixes tokens with {spec.mixer}, not attention: this reads attention heads in every "
                "layer; use a network whose model.net.layout is attention throughout"
            )
    return cast(list[MultiHeadSelfAttention], layers)


def heads_shape(net: Network) -> tuple[int, int]:
    """(layers, heads per layer), whatever each layer's mixer (attention's query heads, another mixer's n_head);
    (0, 0) for a network without a mixer. Layers whose head counts differ are refused: the lens reads one
    (layer, head) grid."""
    counts = [spec.n_head for spec in net.layer_specs]
    if len(set(counts)) > 1 or None in counts:
        raise ValueError(
            f"the layers' heads are {counts}: the lens reads one (layer, head) grid; build every mixer with the "
            "attention's head count"
        )
    return len(counts), int(counts[0] or 0) if counts else 0


def all_attention(net: Network) -> bool:
    """Whether every layer's mixer is attention (a tool reading attention's weight matrices needs it)."""
    return bool(net.layer_specs) and all(spec.attention for spec in net.layer_specs)


def kv_cache_widths(net: Network) -> dict[str, Any]:
    """Numbers the KV cache keeps per token, over all layers: this network's ("kept", with its "heads" kind),
    and what MHA (2·H·d a layer) and MQA (2·d) would keep at its sizes; {} for a network without attention in
    every layer (a recurrent mixer keeps a state, no KV cache)."""
    if not all_attention(net):
        return {}
    layers = attention_layers(net)
    width = {"heads": layers[0].head_kind, "kept": sum(layer.cache_width() for layer in layers)}
    return width | {
        "mha": sum(2 * layer.heads.n_head * layer.head_dim for layer in layers),
        "mqa": sum(2 * layer.head_dim for layer in layers),
    }


def cache_bytes(net: Network, length: int, bytes_per_number: int) -> dict[str, Any]:
    """The bytes one sequence's cache keeps at `length` tokens, per layer (each mixer's cache_size: a KV cache
    grows with the length, a recurrent state does not), and of them its short convolutions' (`conv_bytes`), beside
    what an MHA layer of the same width would keep (2·d_model numbers a token)."""
    layers = [
        {
            "layer": spec.index,
            "kind": spec.kind,
            "mixer": spec.mixer,
            "cache": spec.cache,
            "bytes": mixer.cache_size().at(length) * bytes_per_number,
            "conv_bytes": mixer.cache_size().conv * bytes_per_number,
        }
        for spec, mixer in zip(net.layer_specs, net.mixers, strict=True)
    ]
    width = net.mixers[0].proj.out_features if net.mixers else 0
    return {"length": length, "layers": layers, "mha_layer": 2 * width * length * bytes_per_number}


def network(net: nn.Module) -> Network:
    """`net` typed as the network it is (nothing is checked or converted)."""
    return cast(Network, net)
