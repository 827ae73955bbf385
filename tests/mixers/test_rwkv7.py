"""RWKV-7's time mixing (andrea.mixers.rwkv7): the layer equals fla's RWKV7Attention at its first layer (the one
with no value residual) composed from fla-core 0.6.0's own reference functions, fla/layers/rwkv7.py's forward
as written (token_shift_ref, torch_addcmul_rwkv7, k_update_ref, the dplr recurrence's naive form,
gate_output_correction_ref; fla-core ships no layers); every form equals the layer's reference with every
parameter drawn at random (the kit's cells start from the published initialisation, whose low-rank down
projections are zeros); the token shift restarts at packed documents as fla's does; the published
initialisation; and the mixer trained and sampled from the command line."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from andrea.attention.masks import Document
from andrea.mixers.rwkv7 import RWKV7
from andrea.mixers.token_shift import token_shift
from tests.fla_naive import fla_naive
from tests.mixers.command_line import trains_and_samples

D, H, T = 32, 4, 29


def _layer(form: str = "chunked", **settings) -> RWKV7:
    """A float64 layer with every parameter drawn at random, the low-rank ones included."""
    torch.manual_seed(0)
    layer = RWKV7(D, T, n_head=H, form=form, chunk=8, **settings).double()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if name.endswith(("down", "up")) else 1.0))
    return layer


def _fla_function(path: str, name: str) -> Callable[..., Any]:
    """One pure-PyTorch function of fla-core's, from its file: the files around it import Triton's kernels, which
    a CPU process under the suite's settings cannot load, so only the function's own definition is compiled."""
    spec = importlib.util.find_spec("fla")
    assert spec is not None and spec.submodule_search_locations, "fla-core is in the dev extra"
    source = (Path(spec.submodule_search_locations[0]) / path).read_text()
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    scope: dict[str, Any] = {"torch": torch}
    exec(compile(ast.Module([node], type_ignores=[]), path, "exec"), scope)  # noqa: S102
    return scope[name]


def _fla_first_layer(layer: RWKV7, x: torch.Tensor) -> torch.Tensor:
    """fla/layers/rwkv7.py's RWKV7Attention.forward at layer_idx 0 (v_first is v itself), no mask or cache, on
    the layer's parameters in fla's layout (LoRA: Linear(d, r, bias=False), activation, Linear(r, d))."""
    token_shift_ref = _fla_function("modules/token_shift.py", "token_shift_ref")
    torch_addcmul_rwkv7 = _fla_function("ops/rwkv7/fused_addcmul.py", "torch_addcmul_rwkv7")
    k_update_ref = _fla_function("ops/rwkv7/fused_k_update.py", "k_update_ref")
    gate_output_correction_ref = _fla_function("ops/rwkv7/gate_output_correction.py", "gate_output_correction_ref")
    B, K = x.shape[0], D // H

    def lora(low_rank, u, activation):
        y = F.linear(activation(F.linear(u, low_rank.down.T)), low_rank.up.T)
        return y if low_rank.bias is None else y + low_rank.bias

    mixes = [getattr(layer, f"x_{s}").view(1, 1, D) for s in "rwkvag"]
    xr, xw, xk, xv, xa, xg = torch_addcmul_rwkv7(x, token_shift_ref(x), *mixes)
    r, k, v = layer.r_proj(xr), layer.k_proj(xk), layer.v_proj(xv)
    w = -0.6065306597126334 * lora(layer.w_lora, xw, torch.tanh).sigmoid()
    a = lora(layer.a_lora, xa, lambda u: u).sigmoid()
    g = lora(layer.g_lora, xg, torch.sigmoid)
    kk = F.normalize((k * layer.k_k).view(B, T, H, K), dim=-1, p=2.0)
    k = k_update_ref(k, a, layer.k_a)
    r, w, k, a, v = (u.view(B, T, H, K) for u in (r, w, k, a, v))
    bhtd = [u.transpose(1, 2) for u in (r * K**0.5, k, v, -kk, kk * a, w)]  # the naive form scales q by K^-1/2
    o, _ = fla_naive("generalized_delta_rule/dplr").dplr_recurrence(*(u.float() for u in bhtd))  # alpha too
    assert layer.norm is not None
    o = layer.norm(o.transpose(1, 2).reshape(B * T, D).to(x.dtype)).view(B, T, D)
    o = gate_output_correction_ref(o, r, k, layer.r_k.view(H, K), v, g)
    return layer.proj(o)


@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_the_layer_is_fla_s_rwkv7_attention_at_its_first_layer(form):
    layer = _layer(form)
    x = torch.randn(2, T, D, dtype=torch.float64, requires_grad=True)
    want = _fla_first_layer(layer, x)  # fla's recurrence runs in float32
    got = layer(x)[0]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(got)
    (want_grad,) = torch.autograd.grad(want, x, grad)
    (got_grad,) = torch.autograd.grad(got, x, grad)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("settings", [{}, {"gate": False, "norm": False}])
@pytest.mark.parametrize("form", ["parallel", "chunked", "recurrent"])
def test_every_form_is_the_reference_with_every_parameter_drawn(form, settings):
    """Forward and every gradient, across packed documents, in float64."""
    layer = _layer(form, **settings)
    mask = Document(torch.tensor([[0] * 6 + [1] * 15 + [2] * 8, [4] * 20 + [7] * 9]))
    x = torch.randn(2, T, D, dtype=torch.float64, requires_grad=True)
    got, want = layer(x, mask=mask)[0], layer.reference(x, mask)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    grad = torch.randn_like(got)
    params = [x, *layer.parameters()]
    for g_got, g_want in zip(torch.autograd.grad(got, params, grad), torch.autograd.grad(want, params, grad),
                             strict=True):  # fmt: skip
        torch.testing.assert_close(g_got, g_want, rtol=1e-9, atol=1e-9)


def test_the_token_shift_restarts_where_fla_s_does_at_packed_documents():
    """fla's token_shift_ref with cu_seqlens (one packed row) gives x_{t-1} - x_t, zero before each sequence;
    and a call split in two with the first's last token kept gives the whole call's shift."""
    token_shift_ref = _fla_function("modules/token_shift.py", "token_shift_ref")
    torch.manual_seed(0)
    x = torch.randn(1, 20, 6, dtype=torch.float64)
    seg = torch.tensor([[0] * 7 + [1] * 9 + [2] * 4])
    previous, last = token_shift(x, None, seg)
    want = token_shift_ref(x, torch.tensor([0, 7, 16, 20])) + x
    torch.testing.assert_close(previous, want, rtol=1e-12, atol=1e-12)  # (x_{t-1} - x_t) + x_t
    assert torch.equal(last, x[:, -1])
    first, kept = token_shift(x[:, :10], None, seg[:, :10])
    second, _ = token_shift(x[:, 10:], kept, seg[:, 10:] - seg[:, 9:10])
    assert torch.equal(torch.cat((first, second), dim=1), previous)


def _fla_init(layer_idx: int, n_layer: int, hidden: int, head_dim: int) -> dict[str, torch.Tensor]:
    """fla's RWKV7Attention._initialize_weights, its loops as written there, for the tensors it sets by depth."""
    ratio_0_to_1 = layer_idx / (n_layer - 1)
    ratio_1_to_almost0 = 1.0 - (layer_idx / n_layer)
    ddd, www = torch.ones(hidden), torch.zeros(hidden)
    zigzag, linear = torch.zeros(hidden), torch.zeros(hidden)
    for n in range(hidden):
        linear[n] = n / (hidden - 1) - 0.5
        zigzag[n] = ((n % head_dim) - ((head_dim - 1) / 2)) / ((head_dim - 1) / 2)
        zigzag[n] = zigzag[n] * abs(zigzag[n])
        www[n] = -6 + 6 * (n / (hidden - 1)) ** (1 + 1 * ratio_0_to_1**0.3)
        ddd[n] = n / hidden
    powers = {"r": 0.2, "w": 0.9, "k": 0.7, "v": 0.7, "a": 0.9, "g": 0.2}
    mixes = {f"x_{s}": 1.0 - torch.pow(ddd, p * ratio_1_to_almost0) for s, p in powers.items()}
    return mixes | {"w_lora.bias": www + 0.5 + zigzag * 2.5, "a_lora.bias": -0.19 + zigzag * 0.3 + linear * 0.4,
                    "k_k": 0.71 - linear * 0.1, "k_a": torch.full((hidden,), 1.02), "r_k": torch.full((hidden,), -0.04),
                    "norm.weight": torch.full((hidden,), ((layer_idx + 1) / n_layer) ** 0.7)}  # fmt: skip


@pytest.mark.parametrize("layer", [0, 1, 3])
def test_the_published_initialisation(layer):
    """Every tensor fla's RWKV7Attention sets by the layer's depth, as it sets it; the low-rank down projections
    zero, the up ones orthogonal times 0.1; the GroupNorm's eps head_dim x 1e-5."""
    mixer = RWKV7(64, 32, layer=layer, n_layer=4, n_head=4)
    params = dict(mixer.named_parameters())
    for name, want in _fla_init(layer, 4, 64, 16).items():
        torch.testing.assert_close(params[name], want, rtol=1e-6, atol=1e-6, msg=name)
    assert mixer.w_lora.down.shape == (64, 32) and not mixer.w_lora.down.any()
    up = mixer.w_lora.up
    torch.testing.assert_close(up @ up.T, 0.01 * torch.eye(32), rtol=1e-5, atol=1e-6)
    assert mixer.norm is not None and mixer.norm.eps == pytest.approx(16e-5)


def test_rwkv7_trains_and_samples_from_the_command_line(tmp_path):
    trains_and_samples(tmp_path, "rwkv7")
