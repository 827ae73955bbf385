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
`conv`. A mixer's `kit_settings` (settings that change its math, such as DeltaNet's `allow_neg_eigval`) are rows of
their own, `name[key=value]`, built with them. A mask the mixer refuses in one line is a cell `unsupported`, with
its reason.

A form is compared with the recurrence to the dtype's tolerance (andrea.testing.formula), its absolute part raised,
where the comparison would fail, to OWN_ERROR times the recurrence's own largest error in that dtype (the
reference run in float32 or bfloat16 on the same layer, against its float64 run) if that is larger: a transition
whose eigenvalues reach -1 (β near 2) keeps rounding errors that a contracting one forgets, so the recurrence
itself errs there about as much as the forms do (they at most 1.5 times as much in the built-in rows), while a form that
reads a wrong decay errs thousands of times more in float32 (examples/plugin4's planted bug).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
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
OWN_ERROR = 4  # a form may err up to this many times the recurrence's own error in the cell's dtype


def mixer_names() -> list[str]:
    """Every registered token mixer but attention (whose cells are the attention matrix's)."""
    return [name for name in mixer_registry.names() if name != ATTENTION]


def mixer_rows() -> dict[str, tuple[str, dict[str, Any]]]:
    """The kit's rows: each mixer with its defaults, then with each of its `kit_settings` (`name[key=value]`):
    row -> (mixer, settings)."""
    rows: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in mixer_names():
        for settings in ({}, *_kit_settings(name)):
            rows[name + _label(settings)] = (name, dict(settings))
    return rows


def _kit_settings(name: str) -> tuple[dict[str, Any], ...]:
    try:
        return tuple(getattr(mixer_registry.load(name), "kit_settings", ()))
    except Exception:  # test_mixer_plugins_load names it
        return ()


def _label(settings: dict[str, Any]) -> str:
    """'' for the defaults, else '[key=value,...]' as an override writes them (true, not True)."""
    said = ",".join(
        f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in settings.items()
    )
    return f"[{said}]" if said else ""


def forms_of(row: str) -> tuple[str, ...]:
    """The forms a row's mixer declares (`forms`), or ("own",) for a mixer with one."""
    try:
        return tuple(getattr(mixer_registry.load(mixer_rows()[row][0]), "forms", ())) or ("own",)
    except Exception:  # test_mixer_plugins_load names it
        return ("own",)


def build(row: str, form: str, dtype: torch.dtype = torch.float64) -> Any:
    """A small layer of the row's mixer, seeded: its form, chunks of 8, a short convolution where it takes them,
    the row's settings."""
    name, row_settings = mixer_rows()[row]
    cls = mixer_registry.load(name)
    takes = inspect.signature(cls).parameters
    settings: dict[str, Any] = {"form": form} if form != "own" else {}
    settings |= {key: value for key, value in (("chunk", 8), ("conv", True)) if key in takes}
    torch.manual_seed(0)
    return cls(d_model=D, max_context=T, **(settings | row_settings)).to(dtype)


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


def parity(row: str, form: str, mask_name: str, dtype: torch.dtype, backward: bool) -> str:
    """'passed', or 'unsupported: <the mixer's refusal>' for a mask it refuses in one line."""
    cell = f"{row} x {form} x {mask_name} x {dtype} x {'backward' if backward else 'forward'}"
    layer, mask = build(row, form, dtype), MASKS[mask_name]
    x = torch.randn(B, T, D, dtype=torch.float64)
    grad = torch.randn(B, T, D, dtype=torch.float64)
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
    own = _own_run(reference, x_ref, mask, dtype, grad if backward else None)
    _close(out.double(), expected, dtype, f"{cell}: output differs from the reference's", own, 0)
    if backward:
        out.backward(grad.to(dtype))
        expected.backward(grad)
        _gradients_agree(cell, (layer, x), (reference, x_ref), dtype, own)
    else:  # the same forward as its backward cell's: causality checked once, here
        _reads_no_later_token(cell, layer, x.detach(), out.detach(), mask)
    return "passed"


def _gradients_agree(
    cell: str,
    got: tuple[nn.Module, Tensor],
    want: tuple[Any, Tensor],
    dtype: torch.dtype,
    own: Callable[[], list[Tensor]],
) -> None:
    """After one upstream gradient through the layer and its reference: the input's and every parameter's agree."""
    (layer, x), (reference, x_ref) = got, want
    grads = [x.grad, *(p.grad for p in layer.parameters())]
    wanted = [x_ref.grad, *(p.grad for p in reference.parameters())]
    names = ["the input", *(name for name, _ in layer.named_parameters())]
    for i, (name, g, w) in enumerate(zip(names, grads, wanted, strict=True)):
        assert g is not None and w is not None, f"{cell}: {name} has no gradient"
        _close(g.double(), w, dtype, f"{cell}: {name}'s gradient differs", own, i + 1)


def _own_run(
    reference: Any, x: Tensor, mask: Mask | None, dtype: torch.dtype, grad: Tensor | None
) -> Callable[[], list[Tensor]]:
    """The recurrence run in the cell's dtype on the same weights, when first asked for: its output, then (with
    `grad`) the input's and every parameter's gradient, in float64."""

    @functools.cache
    def run() -> list[Tensor]:
        layer = copy.deepcopy(reference).to(dtype)
        layer.zero_grad(set_to_none=True)  # the float64 run's, where it has run backward already
        x_own = x.detach().to(dtype).requires_grad_(grad is not None)
        with torch.set_grad_enabled(grad is not None):
            out = layer.reference(x_own, mask)
        if grad is None:
            return [out.double()]
        out.backward(grad.to(dtype))
        return [t.detach().double() for t in (out, x_own.grad, *(p.grad for p in layer.parameters()))]

    return run


def _close(
    got: Tensor, want: Tensor, dtype: torch.dtype, what: str, own: Callable[[], list[Tensor]], index: int
) -> None:
    """got == want (float64) to the dtype's tolerance, or, where not, with its absolute tolerance raised to
    OWN_ERROR times the recurrence's own largest error in the dtype on the same tensor (`own()[index]`, run only
    then) where that is larger."""
    try:
        assert_close(got, want, dtype, what)
    except AssertionError:
        error = float((own()[index] - want).abs().max())
        widened = f"{what} (beyond {OWN_ERROR}x the recurrence's own {dtype} error, {error:.3g})"
        assert_close(got, want, dtype, widened, atol=OWN_ERROR * error)


def _reads_no_later_token(cell: str, layer: nn.Module, x: Tensor, out: Tensor, mask: Mask | None) -> None:
    """The layer's output `out` on x before token PREFILL is what it gives whatever the tokens from PREFILL on are:
    a form that reads a later token fails here even where the mixer's reference reads it too."""
    later = torch.cat((x[:, :PREFILL], torch.randn_like(x[:, PREFILL:])), dim=1)
    with torch.no_grad():
        after = layer(later, mask=mask)[0][:, :PREFILL]
    what = f"{cell}: the output before token {PREFILL} changes with the tokens after it"
    assert_close(after.double(), out[:, :PREFILL].double(), x.dtype, what)


def decode(row: str, form: str, mask_name: str, prefilled: bool) -> str:
    """Token by token from a cache (the first PREFILL tokens at once, with `prefilled`): the reference's
    outputs, in float64. 'passed', or 'unsupported: <the mixer's refusal>' for a mask it refuses in one line."""
    start = "a prefilled" if prefilled else "an empty"
    cell = f"{row} x {form} x {mask_name}: decoding from {start} cache"
    layer, mask = build(row, form), MASKS[mask_name]
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
