"""What backends and masks declare about themselves, checked (the conformance kit's other half, beside
andrea.testing.checks' parity against the math):

    capabilities(backend, masks)   a call its capabilities exclude is refused, an accepted one runs
    mask_flags(mask)               every flag a mask declares, and its params(), hold for its predicate
"""

from __future__ import annotations

import torch

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
        try:
            backend(q, k, v, Causal())
        except UnsupportedAttentionError as refused:
            assert NOT_ON_CPU in str(refused), f"{backend.name}: refuses CPU backward with {refused}"
        else:
            raise AssertionError(f"{backend.name}: declares no CPU backward but ran one")
    for mask in masks:
        excluded = caps.mask_kinds is not None and not mask.kinds <= caps.mask_kinds
        with torch.no_grad():
            try:
                backend(q.detach(), k.detach(), v.detach(), mask)
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
    if mask.is_causal:
        assert torch.equal(allowed, distance >= 0), f"{name}: declares is_causal, but its predicate is not causal"
    if mask.is_full:
        assert bool(allowed.all()), f"{name}: declares is_full, but masks some keys"
    if mask.attends_self:
        assert bool(allowed[..., torch.arange(seq), torch.arange(seq)].all()), (
            f"{name}: declares attends_self, but some query does not see itself"
        )
    if not mask.head_dependent:
        assert bool((allowed == allowed[:, :1]).all()), f"{name}: differs between heads, not head_dependent"
    if not mask.batch_dependent:
        assert bool((allowed == allowed[:1]).all()), f"{name}: differs between sequences, not batch_dependent"
    if mask.translation_invariant:
        shifted = allowed[..., 1:, 1:] == allowed[..., :-1, :-1]
        assert bool(shifted.all()), f"{name}: declares translation_invariant, but depends on more than q - kv"
    if mask.max_lookback is not None:
        too_far = allowed & (distance >= mask.max_lookback)
        assert not bool(too_far.any()), f"{name}: declares max_lookback={mask.max_lookback}, but sees further back"
    dense = mask.dense(seq, seq, batch_size=batch, num_heads=heads)
    assert torch.equal(dense.expand(batch, heads, seq, seq), allowed), f"{name}: dense() disagrees with predicate()"
    params = mask.params()  # what a kernel computing the mask itself reads (andrea.attention.masks.params)
    if params is not None:
        said = params.predicate(b, q_idx, kv_idx).expand(batch, heads, seq, seq)
        assert torch.equal(said, allowed), f"{name}: params() says another mask than predicate()"
