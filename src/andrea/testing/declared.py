"""What backends and masks declare about themselves, checked (the conformance kit's other half, beside
andrea.testing.checks' parity against the math):

    capabilities(backend, masks)   a call its capabilities exclude is refused, an accepted one runs
    mask_flags(mask)               every flag a mask declares, and its params(), hold for its predicate
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from andrea.attention import Causal, UnsupportedAttentionError
from andrea.attention.contract import AttentionBackend
from andrea.attention.masks import Mask
from andrea.testing.checks import BATCH, NOT_ON_CPU, SEQ, make_qkv, runs_here


def capabilities(backend: AttentionBackend, masks: list[Mask]) -> None:
    """What the capabilities exclude is refused with UnsupportedAttentionError; the rest runs."""
    caps = backend.capabilities
    q, k, v = make_qkv("mha", requires_grad=True)
    if not runs_here(backend):
        try:
            backend(q.detach(), k.detach(), v.detach(), Causal())
        except UnsupportedAttentionError:
            return
        raise AssertionError(f"{backend.name}: declares it cannot run here ({caps.unavailable or 'no CPU'}) but ran")
    if not caps.cpu_backward:
        _refuses_cpu_backward(backend, q, k, v)
    for mask in masks:
        _serves_the_masks_it_declares(backend, mask, q.detach(), k.detach(), v.detach())


def _refuses_cpu_backward(backend: AttentionBackend, q: Tensor, k: Tensor, v: Tensor) -> None:
    try:
        backend(q, k, v, Causal())
    except UnsupportedAttentionError as refused:
        assert NOT_ON_CPU in str(refused), f"{backend.name}: refuses CPU backward with {refused}"
    else:
        raise AssertionError(f"{backend.name}: declares no CPU backward but ran one")


def _serves_the_masks_it_declares(backend: AttentionBackend, mask: Mask, q: Tensor, k: Tensor, v: Tensor) -> None:
    caps = backend.capabilities
    excluded = caps.mask_kinds is not None and not mask.kinds <= caps.mask_kinds
    with torch.no_grad():
        try:
            backend(q, k, v, mask)
        except UnsupportedAttentionError as refused:
            assert excluded, f"{backend.name} x {mask.name}: refused a mask its capabilities accept ({refused})"
        else:
            assert not excluded, f"{backend.name} x {mask.name}: declares it cannot take {mask.kind}, but ran it"


def mask_flags(mask: Mask, batch: int = BATCH, seq: int = SEQ, heads: int = 4) -> None:
    """Each flag the mask declares (backends take fast paths and caches trim on them) holds on a grid."""
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(heads).view(1, -1, 1, 1)
    q_idx = torch.arange(seq).view(1, 1, -1, 1)
    kv_idx = torch.arange(seq).view(1, 1, 1, -1)
    allowed = mask.predicate(b, h, q_idx, kv_idx).expand(batch, heads, seq, seq)  # (B, H, T, S)
    distance = (q_idx - kv_idx).expand_as(allowed)
    name = f"mask {mask.name}"
    for declared, holds, claim in _flags(mask, allowed, distance):
        assert not declared or holds(), f"{name}: {claim}"
    dense = mask.dense(seq, seq, batch_size=batch, num_heads=heads)
    assert torch.equal(dense.expand(batch, heads, seq, seq), allowed), f"{name}: dense() disagrees with predicate()"
    params = mask.params()  # what a kernel computing the mask itself reads (andrea.attention.masks.params)
    if params is not None:
        said = params.predicate(b, q_idx, kv_idx).expand(batch, heads, seq, seq)
        assert torch.equal(said, allowed), f"{name}: params() says another mask than predicate()"


def _flags(mask: Mask, allowed: Tensor, distance: Tensor) -> list[tuple[bool, Callable[[], bool], str]]:
    """(whether the mask declares it, whether it holds for `allowed` (B, H, T, S), what it claims if it fails)."""
    seq = allowed.shape[-1]
    lookback = mask.max_lookback
    return [
        (mask.is_causal, lambda: torch.equal(allowed, distance >= 0),
         "declares is_causal, but its predicate is not causal"),
        (mask.is_full, lambda: bool(allowed.all()), "declares is_full, but masks some keys"),
        (mask.attends_self, lambda: bool(allowed[..., torch.arange(seq), torch.arange(seq)].all()),
         "declares attends_self, but some query does not see itself"),
        (not mask.head_dependent, lambda: bool((allowed == allowed[:, :1]).all()),
         "differs between heads, not head_dependent"),
        (not mask.batch_dependent, lambda: bool((allowed == allowed[:1]).all()),
         "differs between sequences, not batch_dependent"),
        (mask.translation_invariant, lambda: bool((allowed[..., 1:, 1:] == allowed[..., :-1, :-1]).all()),
         "declares translation_invariant, but depends on more than q - kv"),
        (lookback is not None, lambda: not bool((allowed & (distance >= (lookback or 0))).any()),
         f"declares max_lookback={lookback}, but sees further back"),
    ]  # fmt: skip
