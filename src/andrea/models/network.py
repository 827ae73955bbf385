"""What andrea's tools read from a network: GPT, ToyModel, or a user's model of the same shape.

torch types every attribute of an nn.Module as `Tensor | Module`; `network(net)` states
instead what a network of the zoo holds, for the code that reads it (sampling, training).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

from torch import Tensor, nn

if TYPE_CHECKING:
    from andrea.attention import MultiHeadSelfAttention
    from andrea.attention.kv_cache import KVCache


class Network(Protocol):
    vocab_size: int
    max_context: int

    @property
    def attention(self) -> Sequence[MultiHeadSelfAttention]:
        """The attention layers, first to last (GPT: a list, ToyModel: its nn.ModuleList)."""
        ...

    def new_cache(self) -> list[KVCache]: ...

    def __call__(
        self, idx: Tensor, return_weights: bool = False, cache: list[KVCache] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """idx (B, T) -> logits (B, T, V) and, when asked, one (B, H, T, S) weight tensor per layer."""
        ...


def heads_shape(net: Network) -> tuple[int, int]:
    """(attention layers, query heads per layer); (0, 0) for a network without attention."""
    return len(net.attention), net.attention[0].heads.n_head if net.attention else 0


def network(net: nn.Module) -> Network:
    """`net` typed as the network it is (nothing is checked or converted)."""
    return cast(Network, net)
