"""Llama 4 as andrea builds it (conf/model/llama4.yaml; andrea.models.files.llama4) against transformers' own model
code (Llama4ForCausalLM with dense layers, its eager attention on CPU), on the same random weights: transformers
writes the folder, andrea's loader reads it as data and maps the tensors, and both networks compute the same
function: the logits, each layer, every gradient, the pattern of layer kinds, and the tokens decoded one at a time
from their caches (tests/models/hf_parity.py). Chunks of 4 tokens and a temperature floor of 3 put both inside
the 20-token sequences and the 17 decoded positions."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import Llama4ForCausalLM, Llama4TextConfig

from andrea.models.files.hf_folder import HFFolderError
from andrea.models.files.llama4 import load_llama4, state_dict
from andrea.models.network import network
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, intermediate_size_mlp=80, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-5,
    moe_layers=[], attention_chunk_size=4, floor_scale=3, attn_scale=0.2,
    rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
)  # fmt: skip  # dense layers, GQA, chunks and a temperature floor shorter than the sequences
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("llama4")
    hf = saved(Llama4ForCausalLM(Llama4TextConfig(**CONFIG | {"attn_implementation": "eager"})), folder)
    net, config = load_llama4(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types_and_no_rope_layers(llama):
    hf, net, _, _ = llama
    specs = network(net).layer_specs
    assert hf.config.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    assert [spec.kind for spec in specs] == ["chunked" if rope else "nope" for rope in hf.config.no_rope_layers]
    assert [spec.settings["position"] for spec in specs] == ["rope"] * 3 + ["none"]


def test_the_logits_equal_transformers(llama):
    hf, net, _, _ = llama
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(llama):
    hf, net, _, _ = llama
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 4 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(llama):
    hf, net, _, _ = llama
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: state_dict(grads, 4, False, "grads"))
    assert error <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(llama):
    hf, net, _, _ = llama
    assert decoded_alike(net, hf, VOCAB)


def test_experts_and_other_folders_are_refused_in_one_line(llama, tmp_path):
    _, _, _, folder = llama
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"moe_layers": [1, 3]}))
    with pytest.raises(HFFolderError, match=r"moe_layers=\[1, 3\]; andrea reads Llama 4's dense layers only"):
        load_llama4(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config | {"no_rope_layers": [1, 1, 1]}))
    with pytest.raises(HFFolderError, match="no_rope_layers must give 4 layers each 1"):
        load_llama4(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "llama4")
    assert result.status == "completed" and result.global_step == 5 and alike
