"""The conformance kit's mixer cells: every registered token mixer other than attention (built-in or plugin,
entry-point group `andrea.mixers`) against the recurrence it declares, `mixer.reference(x, mask)`: the layer
computed one token at a time as its paper writes it, on its own (never through the parts its forms share: a
decay that reads a later token is then a difference, not the same mistake on both sides), run in float64 on a
copy of the layer. A mixer without one has nothing to be proven against: its cells fail, saying so.

    parity   mixer x form x mask x dtype x pass: the output, and in the backward pass the input's and every
             parameter's gradient, against the reference's; and the output before a token the same whatever
             tokens follow it
    decode   token by token from an empty cache, and from a cache prefilled with most of the sequence: the
             reference's outputs, in float64

A mixer's forms are its `forms` (each built with `form=`; none: the one it has); the cells are small (B=2,
T=21, d_model=16) and cross chunks of 8 where the mixer takes a `chunk`, a short convolution on where it takes
`conv`. A mask the mixer refuses in one line is a cell `unsupported`, with its reason.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.masks import Document, KeyPadding, Mask
from andrea.mixers.layers import ATTENTION, mixer_registry
from andrea.testing.formula import assert_close

B, T, D, PREFILL = 2, 21, 16, 13
MASKS: dict[str, Mask | None] = {
    "causal": None,  # a mixer's own order, with no per-batch mask
    "document": Document(torch.tensor([[0] * 4 + [1] * 10 + [2] * 7, [5] * 12 + [3] * 9])),  # a boundary in a chunk
    "padding": KeyPadding(torch.tensor([T - 3, 0])),  # a sequence with no real token at all
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def mixer_names() -> list[str]:
    """Every registered token mixer but attention (whose cells are the attention matrix's)."""
    return [name for name in mixer_registry.names() if name != ATTENTION]


def forms_of(name: str) -> tuple[str, ...]:
    """The forms a mixer declares (`forms`), or ("own",) for a mixer with one."""
    try:
        return tuple(getattr(mixer_registry.load(name), "forms", ())) or ("own",)
    except Exception:  # test_mixer_plugins_load names it
        return ("own",)


def build(name: str, form: str, dtype: torch.dtype = torch.float64) -> Any:
    """A small layer of the mixer, seeded: its form, chunks of 8, a short convolution where it takes them."""
    cls = mixer_registry.load(name)
    takes = inspect.signature(cls).parameters
    settings: dict[str, Any] = {"form": form} if form != "own" else {}
    settings |= {key: value for key, value in (("chunk", 8), ("conv", True)) if key in takes}
    torch.manual_seed(0)
    return cls(d_model=D, max_context=T, **settings).to(dtype)


def recurrence(cell: str, layer: nn.Module, x: Tensor, mask: Mask | None) -> tuple[Any, Tensor]:
    """A float64 copy of the layer, and its `reference(x, mask)`; a mixer that declares none fails the cell."""
    reference = copy.deepcopy(layer).double()
    declared = getattr(reference, "reference", None)
    if not callable(declared):
        raise AssertionError(
            f"{cell}: the mixer declares no reference(x, mask), so no recurrence to prove its forms against"
        )
    try:
        return reference, declared(x, mask)
    except NotImplementedError as missing:  # a base class's refusal: the mixer has not written its own
        raise AssertionError(f"{cell}: {missing}") from None


def parity(name: str, form: str, mask_name: str, dtype: torch.dtype, backward: bool) -> str:
    """'passed', or 'unsupported: <the mixer's refusal>' for a mask it refuses in one line."""
    cell = f"{name} x {form} x {mask_name} x {dtype} x {'backward' if backward else 'forward'}"
    layer, mask = build(name, form, dtype), MASKS[mask_name]
    x = torch.randn(B, T, D, dtype=torch.float64)
    x_ref, x = x.clone().requires_grad_(backward), x.to(dtype).requires_grad_(backward)
    with torch.set_grad_enabled(backward):
        try:
            out, _ = layer(x, mask=mask)
        except ValueError as err:
            if mask is not None and "mask" in str(err):
                return f"unsupported: {err}"
            raise
        reference, expected = recurrence(cell, layer, x_ref, mask)
    assert out.shape == (B, T, D) and out.dtype == dtype, f"{cell}: output {tuple(out.shape)} {out.dtype}"
    assert torch.isfinite(out).all(), f"{cell}: output not finite"
    assert_close(out.double(), expected, dtype, f"{cell}: output differs from the reference's")
    if backward:
        _gradients_agree(cell, (layer, x, out), (reference, x_ref, expected), dtype)
    else:  # the same forward as its backward cell's: causality checked once, here
        _reads_no_later_token(cell, layer, x.detach(), out.detach(), mask)
    return "passed"


def _reads_no_later_token(cell: str, layer: nn.Module, x: Tensor, out: Tensor, mask: Mask | None) -> None:
    """The layer's output `out` on x before token PREFILL is what it gives whatever the tokens from PREFILL on are:
    a form that reads a later token fails here even where the mixer's reference reads it too."""
    later = torch.cat((x[:, :PREFILL], torch.randn_like(x[:, PREFILL:])), dim=1)
    with torch.no_grad():
        after = layer(later, mask=mask)[0][:, :PREFILL]
    what = f"{cell}: the output before token {PREFILL} changes with the tokens after it"
    assert_close(after.double(), out[:, :PREFILL].double(), x.dtype, what)


def _gradients_agree(
    cell: str, got: tuple[Any, Tensor, Tensor], want: tuple[Any, Tensor, Tensor], dtype: torch.dtype
) -> None:
    """One upstream gradient through the layer and its reference: the input's and every parameter's agree."""
    (layer, x, out), (reference, x_ref, expected) = got, want
    grad = torch.randn_like(expected)
    out.backward(grad.to(dtype))
    expected.backward(grad)
    assert x.grad is not None and x_ref.grad is not None
    assert_close(x.grad.double(), x_ref.grad, dtype, f"{cell}: the input's gradient differs")
    for (param, p), p_ref in zip(layer.named_parameters(), reference.parameters(), strict=True):
        assert p.grad is not None and p_ref.grad is not None, f"{cell}: {param} has no gradient"
        assert_close(p.grad.double(), p_ref.grad, dtype, f"{cell}: {param}'s gradient differs")


def decode(name: str, form: str, mask_name: str, prefilled: bool) -> str:
    """Token by token from a cache (the first PREFILL tokens at once, with `prefilled`): the reference's
    outputs, in float64. 'passed', or 'unsupported: <the mixer's refusal>' for a mask it refuses in one line."""
    start = "a prefilled" if prefilled else "an empty"
    cell = f"{name} x {form} x {mask_name}: decoding from {start} cache"
    layer, mask = build(name, form), MASKS[mask_name]
    x = torch.randn(B, T, D, dtype=torch.float64)
    with torch.no_grad():
        try:
            _, expected = recurrence(cell, layer, x, mask)
        except ValueError as err:
            if mask is not None and "mask" in str(err):  # a mask the mixer refuses, in one line
                return f"unsupported: {err}"
            raise
        cache, steps = layer.new_cache(), []
        first = PREFILL if prefilled else 1
        steps.append(layer(x[:, :first], mask=mask, cache=cache)[0])
        steps += [layer(x[:, t : t + 1], mask=mask, cache=cache)[0] for t in range(first, T)]
    got: Tensor = torch.cat(steps, dim=1)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9, msg=lambda detail: f"{cell} differs\n{detail}")
    return "passed"
