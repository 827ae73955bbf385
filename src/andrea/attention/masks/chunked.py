"""Chunked attention (Llama 4's local layers, `attention_chunk_size`): the sequence cut into chunks of `size` tokens
from its first, each query sees the keys before it in its own chunk, so a query at the start of a chunk sees only
itself however long the text.

    chunked(c) = causal & Chunk(c)        query i sees key j when j <= i and i // c == j // c

Unlike a sliding window, what a query sees depends on where it sits, not on the distance alone.
"""

from dataclasses import dataclass
from typing import ClassVar

from andrea.attention.masks.base import Mask
from andrea.attention.masks.causal import Causal
from andrea.attention.masks.composite import Composite
from andrea.attention.masks.primitives import Chunk


@dataclass(frozen=True, repr=False)
class Chunked(Composite):
    size: int
    kind: ClassVar[str] = "chunked"

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size <= 0:
            raise ValueError(f"mask.size={self.size!r} must be a positive integer (the tokens in each chunk)")

    def compose(self) -> Mask:
        return Causal() & Chunk(self.size)

    @property
    def name(self) -> str:
        return f"chunked_{self.size}"

    def check_context(self, seq_len: int) -> None:
        if self.size > seq_len:
            raise ValueError(
                f"mask.size={self.size} is longer than the context data.seq_len={seq_len}; use a value <= {seq_len} "
                "(a chunk that covers the whole context is mask=causal)"
            )

    @classmethod
    def examples(cls, batch: int, seq: int) -> list[Mask]:
        return [cls(3)]
