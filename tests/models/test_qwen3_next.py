"""Qwen3-Next as andrea builds it (conf/model/qwen3-next.yaml; andrea.models.files.qwen3_next) against transformers'
own model code (Qwen3NextForCausalLM with dense layers: its pure-PyTorch Gated DeltaNet, convolution and eager
attention on CPU), on the same random weights: transformers writes the folder, andrea's loader reads it as data and
splits its fused projections, and both networks compute the same function: the logits, each layer (both kinds),
every gradient, the pattern of layer kinds, and the tokens decoded one at a time from their caches (a state for the
Gated DeltaNet layers, keys and values for the attention; tests/models/hf_parity.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

from andrea.models.files.hf_folder import HFFolderError
from andrea.models.files.qwen3_next import gradients_of, load_qwen3_next
from andrea.models.network import network
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=16,
    linear_value_head_dim=32, linear_conv_kernel_dim=4, max_position_embeddings=64, mlp_only_layers=[0, 1, 2, 3],
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
)  # fmt: skip  # dense layers, GQA, a quarter of each head turned, values twice the keys' width
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qwen3_next")
    model = Qwen3NextForCausalLM(Qwen3NextConfig(**CONFIG | {"attn_implementation": "eager"}))
    # Decay rates exp(A_log) in [0.05, 0.5], where a state lives a few tokens: at transformers' init (up to 16)
    # most heads forget within a token, and their decay's gradients (~1e-8) sink into float32's rounding.
    with torch.no_grad():
        for layer in model.model.layers[:3]:
            layer.linear_attn.A_log.copy_(torch.empty(4).uniform_(0.05, 0.5).log())
    hf = saved(model, folder)
    net, config = load_qwen3_next(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(qwen):
    hf, net, _, _ = qwen
    specs = network(net).layer_specs
    assert hf.config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert [(spec.kind, spec.mixer) for spec in specs] == [("linear", "gated_deltanet")] * 3 + [("full", "attention")]
    assert [spec.cache for spec in specs] == ["state"] * 3 + ["keys and values"]


def test_the_logits_equal_transformers(qwen):
    hf, net, _, _ = qwen
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(qwen):
    hf, net, _, _ = qwen
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 4 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(qwen):
    hf, net, _, _ = qwen
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: gradients_of(grads, 4, False, "grads"))
    assert error <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(qwen):
    hf, net, _, _ = qwen
    assert decoded_alike(net, hf, VOCAB)


def test_experts_and_wider_value_heads_are_refused_in_one_line(qwen, tmp_path):
    _, _, _, folder = qwen
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"mlp_only_layers": [0]}))
    with pytest.raises(HFFolderError, match=r"mlp_only_layers=\[0\]; andrea reads Qwen3-Next's dense layers only"):
        load_qwen3_next(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config | {"linear_num_value_heads": 8}))
    with pytest.raises(HFFolderError, match="linear_num_value_heads differs from linear_num_key_heads"):
        load_qwen3_next(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "qwen3-next")
    assert result.status == "completed" and result.global_step == 5 and alike
