"""The conformance checks, as plain functions: each raises AssertionError naming the cell it failed in.

    parity(backend, mask, heads, dtype, backward, score_mod, mechanism)
                                                                against the mechanism's formula (softmax's without
                                                                one) in float64 on the same inputs
    decode(backend, mask, heads)                                queries at the end of longer keys (T < S)
    weights(backend, mask, heads)                               need_weights: the formula's (B, H, T, S) weights
    (the formula and what a mechanism declares of its weights: andrea.testing.formula)
    empty_rows(backend)                                         a query with no key gives zeros, never NaN
    relative_positions(backend, mechanism, position, heads)     a block with RoPE or ALiBi gives the same output
                                                                at any offset: every map depends on i - j only

What backends and masks declare about themselves (capabilities, flags) is checked in
andrea.testing.declared.

`andrea.testing.test_conformance` runs them over every registered backend and mask.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.attention import Causal, Document, KeyPadding, UnsupportedAttentionError
from andrea.attention.contract import AttentionBackend
from andrea.attention.kv_cache import KVCache
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.positions import ALiBi, ScoreMod
from andrea.attention.registry import PROBE_SIZES
from andrea.testing.formula import assert_close, formula_attention, gradients_agree

HEADS = {"mha": (4, 4), "gqa": (4, 2), "mqa": (4, 1)}  # name -> (n_head, n_kv_head)
BATCH, SEQ, HEAD_DIM = 2, PROBE_SIZES["max_context"], PROBE_SIZES["head_dim"]  # 9 keys, heads of 8
NOT_ON_CPU = "no backward on CPU"
MECHANISM_SIZES = dict(PROBE_SIZES)  # the layer the registry probes plugin mechanisms with


def mechanism_examples(name: str) -> list[Mechanism]:
    """A registered mechanism's examples for the kit's sizes, every parameter drawn at random (seeded)."""
    from andrea.attention import mechanism_registry

    generator = torch.Generator().manual_seed(0)
    examples = mechanism_registry.load(name).examples(dict(MECHANISM_SIZES))
    with torch.no_grad():
        for mechanism in examples:
            for parameter in mechanism.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return examples


def make_qkv(
    heads: str,
    dtype: torch.dtype = torch.float32,
    batch: int = BATCH,
    seq: int = SEQ,
    head_dim: int = HEAD_DIM,
    requires_grad: bool = False,
    queries: int | None = None,
    device: str = "cpu",
) -> list[Tensor]:
    """q (B, H, T, d), k and v (B, H_kv, S, d); T = `queries` (default: S = `seq`)."""
    n_head, n_kv_head = HEADS[heads]
    q = torch.randn(batch, n_head, queries or seq, head_dim, device=device)
    k = torch.randn(batch, n_kv_head, seq, head_dim, device=device)
    v = torch.randn(batch, n_kv_head, seq, head_dim, device=device)
    return [t.to(dtype).requires_grad_(requires_grad) for t in (q, k, v)]


def parity(
    backend: AttentionBackend,
    mask: Mask,
    heads: str,
    dtype: torch.dtype = torch.float32,
    backward: bool = False,
    score_mod: ScoreMod | None = None,
    seq: int = SEQ,
    head_dim: int = HEAD_DIM,
    device: str = "cpu",
    mechanism: Mechanism | None = None,
) -> str:
    """'passed', or 'unsupported: <the backend's own refusal>' for a cell its capabilities exclude.
    The kit's cells are small CPU ones; `seq`, `head_dim` and `device` size a cell for a GPU. With a
    `mechanism`, the reference is its own (its parameters' gradients are compared too)."""
    cell = f"{_who(backend, mechanism)} x {mask.name}"
    cell += f"{' +' + score_mod.kind if score_mod else ''} x {heads} x {dtype} x " + (
        "backward" if backward else "forward"
    )
    q, k, v = make_qkv(heads, dtype, seq=seq, head_dim=head_dim, requires_grad=backward, device=device)
    ref = [t.detach().double().requires_grad_(backward) for t in (q, k, v)]
    params = [] if mechanism is None else list(mechanism.parameters())
    for p in params:
        p.grad = None  # the kit's mechanisms serve many cells: no gradient carries over from another
    with torch.set_grad_enabled(backward):
        result = _call(backend, cell, q, k, v, mask, score_mod=score_mod, backward=backward, mechanism=mechanism)
        if isinstance(result, UnsupportedAttentionError):
            return f"unsupported: {result}"
        expected, _ = formula_attention(cell, ref[0], ref[1], ref[2], mask, score_mod, mechanism)
    out, _ = result
    assert out.shape == q.shape and out.dtype == dtype, f"{cell}: output {tuple(out.shape)} {out.dtype}"
    assert torch.isfinite(out).all(), f"{cell}: output not finite"
    assert_close(out.double(), expected, dtype, f"{cell}: output differs from the formula's")
    if backward:
        gradients_agree(cell, out, expected, (q, k, v), ref, mechanism)
    return "passed"


def _who(backend: AttentionBackend, mechanism: Mechanism | None) -> str:
    """A cell's backend, and its mechanism where it is not softmax: `eager ~sigmoid`."""
    return backend.name + (f" ~{mechanism.label}" if mechanism is not None else "")


def _call(
    backend: AttentionBackend,
    cell: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Mask,
    *,
    score_mod: ScoreMod | None = None,
    backward: bool = False,
    need_weights: bool = False,
    mechanism: Mechanism | None = None,
) -> tuple[Tensor, Tensor | None] | UnsupportedAttentionError:
    """The backend's (out, weights), or its refusal, once checked to be one its capabilities declare."""
    try:
        return backend(q, k, v, mask, score_mod=score_mod, need_weights=need_weights, mechanism=mechanism)
    except UnsupportedAttentionError as refused:
        _assert_declared(backend, mask, score_mod, backward, str(refused), cell, mechanism)
        return refused


def _assert_declared(
    backend: AttentionBackend,
    mask: Mask,
    score_mod: ScoreMod | None,
    backward: bool,
    refusal: str,
    cell: str,
    mechanism: Mechanism | None = None,
) -> None:
    """A refusal is fine only where the backend's capabilities say so."""
    caps = backend.capabilities
    declared = (
        not runs_here(backend)
        or (caps.mask_kinds is not None and not mask.kinds <= caps.mask_kinds)
        or (backward and not caps.cpu_backward)
        or (score_mod is not None and not caps.score_mod)
        or not backend.serves(mechanism)
        or _wider_keys(backend, mechanism)
    )
    assert declared, f"{cell}: refused although its capabilities accept it ({refusal})"


def _wider_keys(backend: AttentionBackend, mechanism: Mechanism | None) -> bool:
    """A mechanism that widens q and k (Mechanism.extend) on a backend that declares values of the keys' size."""
    return mechanism is not None and mechanism.extra_channels > 0 and not backend.capabilities.distinct_value_dim


def runs_here(backend: AttentionBackend) -> bool:
    """Whether the backend declares it can run on this machine's CPU at all (installed, with a CPU path)."""
    return backend.capabilities.unavailable is None and backend.capabilities.cpu


def decode(backend: AttentionBackend, mask: Mask, heads: str, mechanism: Mechanism | None = None) -> None:
    """Queries aligned to the end of the keys (a KV cache's decode step): T = 3 of S = 9."""
    cell = f"{_who(backend, mechanism)} x {mask.name} x {heads} x decode (T=3, S={SEQ})"
    q, k, v = make_qkv(heads, queries=3)
    with torch.no_grad():
        result = _call(backend, cell, q, k, v, mask, mechanism=mechanism)
        if isinstance(result, UnsupportedAttentionError):
            return
        expected, _ = formula_attention(cell, q, k, v, mask, mechanism=mechanism)
    assert_close(result[0].double(), expected, torch.float32, f"{cell}: output differs from the formula's")


def weights(backend: AttentionBackend, mask: Mask, heads: str, mechanism: Mechanism | None = None) -> None:
    """need_weights=True: the (B, H, T, S) weights of the mechanism's formula, whoever computes them."""
    cell = f"{_who(backend, mechanism)} x {mask.name} x {heads} x need_weights"
    q, k, v = make_qkv(heads)
    with torch.no_grad():
        result = _call(backend, cell, q, k, v, mask, need_weights=True, mechanism=mechanism)
        if isinstance(result, UnsupportedAttentionError):
            return
        _, expected = formula_attention(cell, q, k, v, mask, mechanism=mechanism)
    got = result[1]
    assert got is not None, f"{cell}: no weights returned"
    assert_close(got.double(), expected, torch.float32, f"{cell}: weights differ from the formula's")


def empty_rows(backend: AttentionBackend, mechanism: Mechanism | None = None) -> None:
    """A sequence with no real token: every one of its rows is empty, and must come out zero."""
    cell = f"{_who(backend, mechanism)} x empty rows"
    mask = KeyPadding(torch.tensor([SEQ, 0])) & (Causal() | Document(torch.tensor([[5] * SEQ, [0] * SEQ])))
    q, k, v = make_qkv("gqa")
    with torch.no_grad():
        result = _call(backend, cell, q, k, v, mask, mechanism=mechanism)
    if isinstance(result, UnsupportedAttentionError):
        return
    out = result[0]
    assert torch.isfinite(out).all(), f"{cell}: output not finite"
    assert (out[1] == 0).all(), f"{cell}: an empty row is not zero"


def relative_positions(backend: AttentionBackend, mechanism: Mechanism, position: str, heads: str) -> str:
    """A causal block with `position` (rope, alibi) and `mechanism`, run on the same tokens at positions 0.. and at
    positions 1000.. (an empty KV cache that starts there): RoPE and ALiBi make every map's scores depend on
    i - j only, so both runs give the same output. A position applied across a mechanism's maps (RoPE rotating
    channels of two maps together) does not. 'passed', or the declared refusal."""
    from andrea.attention import MultiHeadSelfAttention

    cell = f"{_who(backend, mechanism)} x causal @{position} x {heads} x shifted by 1000 positions"
    n_head, n_kv_head = HEADS[heads]
    d_model = MECHANISM_SIZES["d_model"]
    x = torch.randn(BATCH, SEQ, d_model, generator=torch.Generator().manual_seed(0))
    shifted = KVCache()
    shifted.start = 1000  # no key cached: the same tokens, 1000 positions on
    try:
        block = MultiHeadSelfAttention(
            d_model, n_head, n_kv_head, backend=backend, mask="causal", max_context=SEQ, position=position,
            mechanism=mechanism,
        )  # fmt: skip
        with torch.no_grad():
            at_zero, _ = block(x)
            later, _ = block(x, cache=shifted)
    except UnsupportedAttentionError as refused:
        score_mod = ALiBi(n_head) if position == "alibi" else None
        _assert_declared(backend, Causal(), score_mod, False, str(refused), cell, mechanism)
        return f"unsupported: {refused}"
    assert_close(later, at_zero, torch.float32, f"{cell}: output depends on the absolute position")
    return "passed"
