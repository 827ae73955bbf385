"""The parity matrix: every backend x mask x head config x dtype, forward and backward,
against `naive` computed in float32 on the same inputs.

A cell a backend declares unsupported is not skipped: the test asserts that the
backend refuses it with its declared reason, and the end-of-run report lists it.
"""

import pytest
import torch

from andrea.attention import UnsupportedAttentionError, get_backend
from andrea.attention.positions import ALiBi

from .helpers import BACKENDS, HEADS, TOLERANCE, make_masks, make_qkv

MASKS = make_masks()
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def reference(q, k, v, mask):
    """naive in float32 on the very same (possibly bf16-rounded) inputs."""
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    out, _ = get_backend("naive")(q, k, v, mask)
    return out, (q, k, v)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_parity(backend_name, mask_name, heads, dtype, direction, record_property):
    record_property("parity_cell", (backend_name, mask_name, heads, dtype, direction))
    backend, mask, dtype = get_backend(backend_name), MASKS[mask_name], DTYPES[dtype]
    backward = direction == "backward"
    q, k, v = make_qkv(heads, dtype, requires_grad=backward)
    expected, ref_inputs = reference(q, k, v, mask)

    if backward and not backend.capabilities.cpu_backward:
        with pytest.raises(UnsupportedAttentionError, match="no backward on CPU") as refused:
            backend(q, k, v, mask)
        record_property("parity_status", f"unsupported: {refused.value}")
        return

    with torch.set_grad_enabled(backward):
        out, _ = backend(q, k, v, mask)
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), expected, **TOLERANCE[dtype])

    if backward:
        grad_out = torch.randn_like(expected)
        expected.backward(grad_out)
        out.backward(grad_out.to(dtype))
        for name, got, ref in zip("qkv", (q, k, v), ref_inputs, strict=True):
            assert torch.isfinite(got.grad).all(), f"d{name} not finite"
            torch.testing.assert_close(got.grad.float(), ref.grad, **TOLERANCE[dtype], msg=f"d{name} differs")
    record_property("parity_status", "passed")


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_parity_with_alibi(backend_name, mask_name, heads, direction, record_property):
    """The same matrix with a score bias (ALiBi) added by every backend, float32."""
    record_property("parity_cell", (backend_name, f"{mask_name} +alibi", heads, "float32", direction))
    backend, mask = get_backend(backend_name), MASKS[mask_name]
    alibi = ALiBi(HEADS[heads][0])
    backward = direction == "backward"
    q, k, v = make_qkv(heads, requires_grad=backward)
    ref_inputs = [t.detach().clone().requires_grad_(backward) for t in (q, k, v)]
    with torch.set_grad_enabled(backward):
        expected, _ = get_backend("naive")(*ref_inputs, mask, score_mod=alibi)
        if backward and not backend.capabilities.cpu_backward:
            with pytest.raises(UnsupportedAttentionError, match="no backward on CPU") as refused:
                backend(q, k, v, mask, score_mod=alibi)
            record_property("parity_status", f"unsupported: {refused.value}")
            return
        out, _ = backend(q, k, v, mask, score_mod=alibi)
    torch.testing.assert_close(out, expected, **TOLERANCE[torch.float32])
    if backward:
        grad_out = torch.randn_like(expected)
        expected.backward(grad_out)
        out.backward(grad_out)
        for name, got, ref in zip("qkv", (q, k, v), ref_inputs, strict=True):
            torch.testing.assert_close(got.grad, ref.grad, **TOLERANCE[torch.float32], msg=f"d{name} differs")
    record_property("parity_status", "passed")
