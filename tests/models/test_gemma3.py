"""Gemma 3 as andrea builds it (conf/model/gemma3.yaml; andrea.models.files.gemma3) against transformers' own model
code (Gemma3ForCausalLM on a text config, its eager attention on CPU), on the same random weights: transformers
writes the folder, andrea's loader reads it as data and maps the tensors, and both networks compute the same
function: the logits, every gradient, the pattern of layer kinds, and the tokens decoded one at a time from their
caches (tests/models/hf_parity.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from andrea.models.files.gemma3 import load_gemma3, state_dict
from andrea.models.files.hf_decoder import KINDS
from andrea.models.files.hf_folder import HFFolderError
from andrea.models.network import network
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4,
    num_key_value_heads=2, head_dim=24, max_position_embeddings=64, sliding_window=4, rms_norm_eps=1e-6,
    query_pre_attn_scalar=32,
)  # fmt: skip  # five window layers to one global (RoPE 10k, 1M), GQA, heads 24 wide at d_model 64 (as 270M's 256 at
# 640), a score scale of 32^-1/2, not 24^-1/2
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("gemma3")
    hf = saved(Gemma3ForCausalLM(Gemma3TextConfig(**CONFIG | {"attn_implementation": "eager"})), folder)
    net, config = load_gemma3(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(gemma):
    hf, net, _, _ = gemma
    specs = network(net).layer_specs
    assert [spec.kind for spec in specs] == [KINDS[t] for t in hf.config.layer_types]
    assert [spec.settings["rope_base"] for spec in specs] == [10000.0] * 5 + [1000000.0]


def test_the_logits_equal_transformers(gemma):
    hf, net, _, _ = gemma
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(gemma):
    """Each decoder layer on the hidden states (and mask, and positions) transformers' forward hands it: the output
    and the input's gradient, every layer kind."""
    hf, net, _, _ = gemma
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 6 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(gemma):
    hf, net, _, _ = gemma
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: state_dict(grads, 6, True, "grads", gradients=True))
    assert error <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(gemma):
    """12 steps past a window of 4."""
    hf, net, _, _ = gemma
    assert decoded_alike(net, hf, VOCAB)


def test_heads_wider_than_d_model_over_n_head_are_read_at_their_width(gemma):
    _, net, config, _ = gemma
    assert config["attention"]["head_dim"] == 24
    assert net.get_submodule("blocks.0.attention.proj").weight.shape == (64, 4 * 24)


def test_a_folder_whose_tensors_are_not_its_config_s_width_is_refused_in_one_line(gemma, tmp_path):
    _, _, _, folder = gemma
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"head_dim": 16}))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(HFFolderError, match="tensors do not fit config.json"):
        load_gemma3(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "gemma3")
    assert result.status == "completed" and result.global_step == 5 and alike
