"""Kimi Linear as andrea builds it (conf/model/kimi-linear.yaml; andrea.models.files.kimi_linear) against
transformers' own model code (KimiLinearForCausalLM with dense layers: its pure-PyTorch Kimi Delta Attention,
convolution and eager latent attention on CPU), on the same random weights: transformers writes the folder, andrea's
loader reads it as data and splits its fused tensors, and both networks compute the same function: the logits, each
layer (both kinds), every gradient, the pattern of layer kinds, and the tokens decoded one at a time from their
caches (a state for the KDA layers, the latent for the attention; tests/models/hf_parity.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import KimiLinearConfig, KimiLinearForCausalLM

from andrea.models.files.hf_folder import HFFolderError
from andrea.models.files.kimi_linear import load_kimi_linear, state_dict
from andrea.models.network import network
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8,
    v_head_dim=16, linear_num_heads=4, linear_head_dim=16, linear_conv_kernel_dim=4, max_position_embeddings=64,
    layer_types=["linear_attention"] * 3 + ["full_attention"], mlp_layer_types=["dense"] * 4, pad_token_id=0,
    bos_token_id=1, eos_token_id=2,
)  # fmt: skip  # dense layers, three KDA layers to one latent attention layer with a shared key part of 8
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def kimi(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("kimi_linear")
    model = KimiLinearForCausalLM(KimiLinearConfig(**CONFIG | {"attn_implementation": "eager"}))
    # Decay rates exp(A_log) in [0.05, 0.5], where a state lives a few tokens: at the published init (1 to 16)
    # most channels forget within a token, and their decay's gradients sink into float32's rounding.
    with torch.no_grad():
        for layer in model.model.layers[:3]:
            layer.self_attn.forget_gate.A_log.copy_(torch.empty(1, 1, 4, 1).uniform_(0.05, 0.5).log())
    hf = saved(model, folder)
    net, config = load_kimi_linear(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(kimi):
    hf, net, _, _ = kimi
    specs = network(net).layer_specs
    assert [(spec.kind, spec.mixer) for spec in specs] == [("linear", "kda")] * 3 + [("full", "attention")]
    assert [spec.cache for spec in specs] == ["state"] * 3 + ["latent"]


def test_the_logits_equal_transformers(kimi):
    hf, net, _, _ = kimi
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(kimi):
    hf, net, _, _ = kimi
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 4 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(kimi):
    hf, net, _, _ = kimi
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: state_dict(as_saved(grads), 4, False, "grads"))
    assert error <= 1e-5, worst


def as_saved(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' module names as its checkpoint names them (the inverse of its kimi_linear conversion: the
    forget gate's tensors on the attention, the fused convolution split into q, k and v)."""
    out: dict[str, torch.Tensor] = {}
    for name, grad in grads.items():
        if name.endswith("self_attn.conv1d.weight"):
            out |= {name.replace("conv1d", f"{part}_conv1d"): g for part, g in zip("qkv", grad.chunk(3), strict=True)}
        else:
            out[name.replace("forget_gate.", "")] = grad
    return out


def test_tokens_decoded_from_the_caches_equal_transformers(kimi):
    hf, net, _, _ = kimi
    assert decoded_alike(net, hf, VOCAB)


def test_experts_and_other_widths_are_refused_in_one_line(kimi, tmp_path):
    _, _, _, folder = kimi
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"mlp_layer_types": ["dense"] * 3 + ["sparse"]}))
    with pytest.raises(HFFolderError, match=r"mlp_layer_types=.*andrea reads Kimi Linear's dense layers only"):
        load_kimi_linear(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config | {"v_head_dim": 32}))
    with pytest.raises(HFFolderError, match="qk_nope_head_dim and v_head_dim must be hidden_size / num_attention_"):
        load_kimi_linear(tmp_path)


def test_a_config_json_in_the_published_layout_reads_as_the_same_model(kimi, tmp_path):
    """The released checkpoints' config.json: the linear layers' settings in linear_attn_config (1-indexed layers),
    the MLPs' kinds as first_k_dense_replace, max_position_embeddings; read as transformers' config reads it."""
    hf, net, _, folder = kimi
    config = json.loads((folder / "config.json").read_text())
    for key in ("linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim", "layer_types", "mlp_layer_types"):
        config.pop(key)
    config["max_position_embeddings"] = config.pop("model_max_length")
    config["linear_attn_config"] = {"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4,
                                    "kda_layers": [1, 2, 3], "full_attn_layers": [4]}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config | {"first_k_dense_replace": 4}))
    (tmp_path / "model.safetensors").symlink_to(folder / "model.safetensors")
    again, _ = load_kimi_linear(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(again(ids)[0], net(ids)[0], rtol=0, atol=0)
    (tmp_path / "config.json").write_text(json.dumps(config | {"first_k_dense_replace": 1}))
    with pytest.raises(HFFolderError, match=r"mlp_layer_types=\['dense', 'sparse'.*dense layers only"):
        load_kimi_linear(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "kimi-linear")
    assert result.status == "completed" and result.global_step == 5 and alike
