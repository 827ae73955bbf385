"""A mask as a few numbers and per-sequence tensors: what a kernel that computes the mask itself
(FlashAttention-style, andrea's triton backend) reads instead of a (T, S) matrix.

    allowed(q, k) = (k < S)
                  & (not causal  or  k <= q  or  k < prefix)      causal, with a bidirectional prefix
                  & (window is None  or  q - k < window)           a sliding window
                  & (not band  or  k - q < window)                 ... both ways (a symmetric band)
                  & (lengths is None  or  k < lengths[b])          key padding
                  & (document_ids is None  or  doc[b, q] == doc[b, k])   packed documents

A mask says itself this way through `Mask.params()`: the built-ins and their `&` combinations do;
`|` combinations and a plugin's masks that do not override it return None, and a backend then
reads their dense form. A backend asks `params()`, never the mask's class. The kit checks that
what `params()` says equals the mask's own predicate (andrea.testing.declared.mask_flags).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor


@dataclass(frozen=True, eq=False)  # may hold tensors: equal only to itself
class MaskParams:
    causal: bool = False  # key <= query, except keys below `prefix`
    prefix: int = 0  # with causal: the first `prefix` keys are seen by every query
    window: int | None = None  # query - key < window (None: unbounded)
    band: bool = False  # and key - query < window
    lengths: Tensor | None = None  # (B,) real keys per sequence
    document_ids: Tensor | None = None  # (B, S) document id of every position

    def __and__(self, other: MaskParams) -> MaskParams | None:
        """Both at once, or None where the parameters cannot say it (two windows, a window and a prefix)."""
        if (self.lengths is not None and other.lengths is not None) or (
            self.document_ids is not None and other.document_ids is not None
        ):
            return None
        position = _meet(_Position.of(self), _Position.of(other))
        if position is None:
            return None
        return MaskParams(
            position.causal, position.prefix, position.window, position.band,
            lengths=self.lengths if other.lengths is None else other.lengths,
            document_ids=self.document_ids if other.document_ids is None else other.document_ids,
        )  # fmt: skip

    def predicate(self, b: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """The mask these parameters say, as an index predicate (the reference `params()` is checked with)."""
        ok = kv_idx >= 0
        if self.causal:
            ok = ok & ((kv_idx <= q_idx) | (kv_idx < self.prefix))
        if self.window is not None:
            ok = ok & (q_idx - kv_idx < self.window)
            if self.band:
                ok = ok & (kv_idx - q_idx < self.window)
        if self.lengths is not None:
            ok = ok & (kv_idx < self.lengths.to(kv_idx.device)[b])
        if self.document_ids is not None:
            ids = self.document_ids.to(kv_idx.device)
            ok = ok & (ids[b, q_idx] == ids[b, kv_idx])
        return ok


@dataclass(frozen=True)
class _Position:
    """The positional part of a MaskParams."""

    causal: bool = False
    prefix: int = 0
    window: int | None = None
    band: bool = False

    @classmethod
    def of(cls, params: MaskParams) -> _Position:
        return cls(params.causal, params.prefix, params.window, params.band)


_UNRESTRICTED, _CAUSAL = _Position(), _Position(causal=True)


def _meet(a: _Position, b: _Position) -> _Position | None:
    """a & b, where one parameter set can say it."""
    if a in (_UNRESTRICTED, b):
        return b
    if b == _UNRESTRICTED:
        return a
    if b == _CAUSAL:
        a, b = b, a
    if a != _CAUSAL:
        return None  # two windows, or a window and a prefix
    if b.prefix:  # causal & prefix-LM: the prefix's look-ahead is cut off, plain causal is left
        return _CAUSAL
    return replace(b, causal=True, band=False)  # causal & a window: the window's causal half
