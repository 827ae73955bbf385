"""What every form of an op walks a sequence with (andrea.ops): its tokens one at a time, its chunks with each
chunk's documents, and the padding that fills the last chunk.

q, k (B, H, T, K), v (B, H, T, V): tokens are dim 2. Packed documents: `seg` (B, T) numbers each token's
document from 0, the one a given state belongs to (andrea.mixers.state_masks)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

CHUNK = 64  # tokens per chunk of the chunked form
FORMS = ("parallel", "chunked", "recurrent")  # mixer.form


def tokens(*xs: Tensor) -> Iterator[tuple[Tensor, ...]]:
    """The tensors' tokens (dim 2) side by side, one token each step (or one chunk, of chunks side by side).
    `unbind`, not indexing: the backward of T indexed views would write T gradients the size of the whole
    sequence, O(T²); unbind's stacks them once."""
    return zip(*(x.unbind(2) for x in xs), strict=True)


def chunk_padding(length: int, chunk: int) -> tuple[int, int]:
    """The chunk's length and the tokens padded to fill the last one: a sequence shorter than a chunk is one chunk
    of its own length, not padded to a whole one."""
    chunk = max(1, min(chunk, length))
    return chunk, -length % chunk


def side_by_side(length: int, chunk: int, seg: Tensor | None, *xs: Tensor) -> tuple[Tensor | None, tuple[Tensor, ...]]:
    """The tensors (dim 2, `length` tokens, a multiple of `chunk`) cut into chunks side by side, (B, H, n, chunk,
    ..), for a form that works on every chunk at once; and the chunks' documents (`documents`), (B, n, chunk)."""
    docs = None if seg is None else torch.stack([d for d in documents(length, chunk, seg) if d is not None], dim=1)
    return docs, tuple(x.unflatten(2, (-1, chunk)) for x in xs)


def documents(length: int, chunk: int, seg: Tensor | None) -> Iterator[Tensor | None]:
    """Each chunk's tokens' documents, of a sequence padded to `length` (a multiple of `chunk`), numbered again
    from 0 at its start (0: the document of the state it starts from; padding stays in the last)."""
    if seg is not None:
        seg = torch.cat((seg, seg[:, -1:].expand(-1, length - seg.shape[1])), dim=1)
    for start in range(0, length, chunk):
        yield None if seg is None else seg[:, start : start + chunk] - (seg[:, start - 1 : start] if start else 0)


def working_dtype(x: Tensor) -> torch.dtype:
    """The dtype an op computes in: float32 at least (float64 stays float64), whatever its inputs are."""
    return torch.promote_types(x.dtype, torch.float32)
