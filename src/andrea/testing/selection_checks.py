"""The conformance kit's selection cells: every registered selection of keys (built-in or plugin, entry-point group
`andrea.attention_selections`) in a small attention layer (eager, RoPE, float64), against dense attention:

    parity    selection x mask x heads x pass, the selection set to give attention over its chosen keys alone
              (attend_chosen_only: NSA's window and compressed branches set aside): the layer's output, and in the
              backward pass the input's and every attention weight's gradient, equal the same layer's without the
              selection under the keys the selection chose (read at hook_selected) ANDed with the mask: attention
              over exactly those keys
    decode    a prefill of PREFILL tokens, then one token at a time through the layer's cache, every branch on:
              the full pass's outputs (what a selection keeps of past tokens, it keeps in the cache)
    covering  the selection set to keep every key (`keep_every_key(T)`), over its chosen keys alone: the layer
              without it, forward (causal and packed documents: a window shows a block in part, and MoBA takes
              whole blocks only)

Masks: causal, causal with three packed documents, and a causal window of 6 (whose cache drops the keys behind it);
heads: MHA, GQA, and latent heads with a query latent (what DSA's indexer reads). A chosen key outside the mask
fails nothing (the layer drops it); a query that keeps no key its mask allows does, in `parity` (no row may be
empty where the mask left keys), as does one that leaves no key out at all (its `kit_settings`, the settings the
kit builds it with, should make it leave some out). The cells prove the layer attends to exactly the keys the
selection chose; that it chooses the keys its paper does is each selection's own test (DSA against transformers'
DeepSeek-V3.2 and fla-core, MoBA against its equations: tests/attention/test_selection.py; NSA against fla-core:
tests/attention/test_nsa.py).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.masks import Document, Mask
from andrea.attention.masks.selected import Selected
from andrea.attention.registry import selection_registry

B, T, D, H, PREFILL = 2, 21, 32, 4, 13
# the layer's own mask, and the batch's: causal; three packed documents; a window of 6, which trims the cache
MASKS: dict[str, tuple[str, Mask | None]] = {
    "causal": ("causal", None),
    "document": ("causal", Document(torch.tensor([[0] * 4 + [1] * 10 + [2] * 7, [5] * 12 + [3] * 9]))),
    "window": ("causal & sliding_window(window=6)", None),
}
HEADS: dict[str, dict[str, Any]] = {
    "mha": {}, "gqa": {"n_kv_head": 2}, "mla": {"latent": {"kv_rank": 8, "q_rank": 12, "rope_dim": 4}},
}  # fmt: skip
TOLERANCE = 1e-10  # float64 on both sides, one the other's computation under another mask


def selection_names() -> list[str]:
    return selection_registry.names()


def build(name: str, mask_name: str, heads: str) -> tuple[MultiHeadSelfAttention, Mask | None]:
    """A small float64 layer with the selection and its `kit_settings` (what leaves keys out at T), seeded, and the
    batch's mask of the cell."""
    torch.manual_seed(0)
    selection = {"name": name} | dict(getattr(selection_registry.load(name), "kit_settings", {}))
    own, batch = MASKS[mask_name]
    layer = MultiHeadSelfAttention(D, H, backend="eager", max_context=T, position="rope", mask=own,
                                   selection=selection, **HEADS[heads])  # fmt: skip
    return layer.double(), batch


def parity(name: str, mask_name: str, heads: str, backward: bool) -> str:
    cell = f"{name} x {mask_name} x {heads} x {'backward' if backward else 'forward'}"
    layer, mask = build(name, mask_name, heads)
    _chosen_only(layer)
    dense = _without_selection(layer)
    x = torch.randn(B, T, D, dtype=torch.float64)
    x_dense, x = x.clone().requires_grad_(backward), x.requires_grad_(backward)
    chosen: list[Tensor] = []
    remove = layer.points["hook_selected"].add(lambda value, point: chosen.append(value.detach()))
    with torch.set_grad_enabled(backward):
        out = layer(x, mask=mask)[0]
        remove()
        keys = Selected(chosen[0]) if mask is None else Selected(chosen[0]) & mask
        expected = dense(x_dense, mask=keys)[0]
    _no_empty_row(cell, layer, chosen[0], mask)
    _same(out, expected, f"{cell}: output differs from dense attention over the chosen keys")
    if backward:
        grad = torch.randn_like(out)
        out.backward(grad)
        expected.backward(grad)
        assert x.grad is not None and x_dense.grad is not None
        _same(x.grad, x_dense.grad, f"{cell}: the input's gradient differs")
        for (param, p), p_dense in zip(_attention_parameters(layer), dense.parameters(), strict=True):
            assert p.grad is not None and p_dense.grad is not None, f"{cell}: {param} has no gradient"
            _same(p.grad, p_dense.grad, f"{cell}: {param}'s gradient differs")
    return "passed"


def decode(name: str, mask_name: str, heads: str) -> str:
    cell = f"{name} x {mask_name} x {heads} x decode"
    layer, mask = build(name, mask_name, heads)
    x = torch.randn(B, T, D, dtype=torch.float64)
    with torch.no_grad():
        expected = layer(x, mask=mask)[0]
        cache = layer.new_cache()
        steps = [layer(x[:, :PREFILL], mask=mask, cache=cache)[0]]
        steps += [layer(x[:, t : t + 1], mask=mask, cache=cache)[0] for t in range(PREFILL, T)]
    got = torch.cat(steps, dim=1)
    _same(got, expected, f"{cell}: decoding differs from the full pass")
    return "passed"


def covering(name: str, mask_name: str, heads: str) -> str:
    cell = f"{name} x {mask_name} x {heads} x keeping every key"
    layer, mask = build(name, mask_name, heads)
    _chosen_only(layer)
    assert layer.selection is not None
    try:
        layer.selection.keep_every_key(T)
    except NotImplementedError as missing:
        raise AssertionError(f"{cell}: {missing}") from None
    x = torch.randn(B, T, D, dtype=torch.float64)
    with torch.no_grad():
        out, expected = layer(x, mask=mask)[0], _without_selection(layer)(x, mask=mask)[0]
    _same(out, expected, f"{cell}: differs from dense attention")
    return "passed"


def _chosen_only(layer: MultiHeadSelfAttention) -> None:
    """Set the layer's selection to give attention over its chosen keys alone (NSA's other branches off)."""
    assert layer.selection is not None
    layer.selection.attend_chosen_only()


def _same(got: Tensor, want: Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=TOLERANCE, atol=TOLERANCE, msg=lambda detail: f"{what}\n{detail}")


def _without_selection(layer: MultiHeadSelfAttention) -> MultiHeadSelfAttention:
    """A copy of the layer that attends to every key its mask allows."""
    dense = copy.deepcopy(layer)
    dense.selection = None
    return dense


def _attention_parameters(layer: MultiHeadSelfAttention) -> list[tuple[str, torch.nn.Parameter]]:
    """The layer's parameters but its selection's, in the order the copy without it lists its own."""
    return [(name, p) for name, p in layer.named_parameters() if not name.startswith("selection.")]


def _no_empty_row(cell: str, layer: MultiHeadSelfAttention, chosen: Tensor, mask: Mask | None) -> None:
    """Every query that may see a key keeps one; and some query leaves one out (else the cell proves nothing)."""
    allowed = layer.allowed(T) if mask is None else layer.allowed(T) & mask.dense(T, T, batch_size=B)
    kept = chosen & allowed  # (B, H or 1, T, S)
    assert not (allowed.any(-1) & ~kept.any(-1)).any(), f"{cell}: a query that may see keys keeps none of them"
    assert (allowed & ~kept).any(), f"{cell}: keeps every key at T={T}: give it kit_settings that leave keys out"
