"""How each layer's weights read on a map and in the head-role scores, whatever its token mixer: attention's
come from its mechanism and mask; another mixer's (its implied weights: q·k under its decay, if it has one) from
what the mixer says of itself, a plugin's optional attributes with safe defaults (andrea.mixers.base):

    name              the map's label ("gla")
    weights_meaning   what a weight is, the map's subtitle
    signed            whether a weight can be negative (a red-white-blue scale); default True
    rows_sum_to_one   whether each row is a distribution (scored as is, else as shares); default False
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from andrea.attention.block import MultiHeadSelfAttention
from andrea.mixers.base import mixer_parts
from andrea.models.network import Network, attention_of

IMPLIED = (
    "implied weights: q·k under the state's decay, each earlier token's share of the output (rows need not sum to 1)"
)


@dataclass(frozen=True)
class WeightStyle:
    label: str  # the mechanism ("softmax") or the mixer ("gla")
    meaning: str  # what a weight is
    signed: bool  # whether a weight can be negative
    rows_sum_to_one: bool  # each row a distribution
    mask: str  # the mask's name: a recurrent mixer's order is causal
    implied: bool = False  # a mixer's implied weights, on no fixed scale unless its rows sum to 1

    @property
    def first_token_as_share(self) -> bool:
        """Whether the first-token mass reads this layer's weights as shares of each row's absolute total: implied
        weights on no fixed scale (retention's q·k γ^(i-j) grows with the keys' norm), where a raw weight says
        nothing on its own. Attention's are read raw, a differential head's negative mass included."""
        return self.implied and not self.rows_sum_to_one


def weight_styles(net: Network) -> list[WeightStyle]:
    """One per layer, first to last."""
    return [_style(mixer, attention) for mixer, attention in zip(net.mixers, attention_of(net), strict=True)]


def _style(mixer: object, attention: MultiHeadSelfAttention | None) -> WeightStyle:
    parts = mixer_parts(mixer)
    if parts:  # a parallel layer: its parts' heads side by side
        return _parallel_style(parts, getattr(mixer, "heads", {}))
    if attention is not None:
        m = attention.mechanism
        return WeightStyle(m.label, m.weights_meaning, m.signed, m.rows_sum_to_one, attention.mask.name)
    return WeightStyle(
        str(getattr(mixer, "name", type(mixer).__name__)),
        str(getattr(mixer, "weights_meaning", IMPLIED)),
        bool(getattr(mixer, "signed", True)),
        bool(getattr(mixer, "rows_sum_to_one", False)),
        "causal",
        implied=True,
    )


def _parallel_style(parts: dict[str, nn.Module], heads: dict[str, int | None]) -> WeightStyle:
    """A parallel layer's style: its parts' labels joined, the subtitle saying which heads are whose."""
    styles, start, said = [], 0, []
    for name, part in parts.items():
        style = _style(part, part if isinstance(part, MultiHeadSelfAttention) else None)
        count = heads.get(name) or 0
        said.append(f"heads {start}-{start + count - 1} {name} ({style.label}): {style.meaning}")
        styles.append(style)
        start += count
    return WeightStyle(
        "+".join(style.label for style in styles),
        "; ".join(said),
        any(style.signed for style in styles),
        all(style.rows_sum_to_one for style in styles),
        "causal",
        implied=any(style.implied for style in styles),
    )


def allowed_of(net: Network, T: int) -> list[Tensor] | None:
    """Each layer's mask as (T, T) booleans, True where a query may see a key, from the layer itself (its mask
    buffer; a recurrent mixer: the causal order); None for a mask that depends on the batch (key padding,
    documents), which a map of one sequence does not draw."""
    layers = attention_of(net)
    if any(layer.mask.batch_dependent for layer in layers if layer is not None):
        return None
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return [causal if layer is None else layer.allowed(T)[0].cpu() for layer in layers]
