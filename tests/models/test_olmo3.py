"""OLMo 3 as andrea builds it (conf/model/olmo3.yaml; andrea.models.files.olmo3) against transformers' own model
code (Olmo3ForCausalLM, its eager attention on CPU), on the same random weights: transformers writes the folder,
andrea's loader reads it as data and maps the tensors, and both networks compute the same function: the logits,
every gradient, the pattern of layer kinds, and the tokens decoded one at a time from their caches
(tests/models/hf_parity.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import Olmo3Config, Olmo3ForCausalLM

from andrea.models.files.hf_decoder import KINDS
from andrea.models.files.hf_folder import HFFolderError
from andrea.models.files.olmo3 import load_olmo3, state_dict
from andrea.models.network import network
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 500000.0}}  # fmt: skip
CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, sliding_window=4, rms_norm_eps=1e-6, rope_parameters=ROPE,
)  # fmt: skip  # GQA, a window shorter than the sequences, two RoPE bases
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def olmo(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("olmo3")
    hf = saved(Olmo3ForCausalLM(Olmo3Config(**CONFIG | {"attn_implementation": "eager"})), folder)
    net, config = load_olmo3(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(olmo):
    hf, net, _, _ = olmo
    specs = network(net).layer_specs
    assert [spec.kind for spec in specs] == [KINDS[t] for t in hf.config.layer_types]
    assert [spec.cache for spec in specs] == ["keys and values, last 4 tokens"] * 3 + ["keys and values"]


def test_the_logits_equal_transformers(olmo):
    hf, net, _, _ = olmo
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(olmo):
    """Each decoder layer on the hidden states (and mask, and positions) transformers' forward hands it: the output
    and the input's gradient, every layer kind."""
    hf, net, _, _ = olmo
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 4 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(olmo):
    hf, net, config, _ = olmo
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: state_dict(grads, 4, False, "grads"))
    assert error <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(olmo):
    """12 steps past a window of 4."""
    hf, net, _, _ = olmo
    assert decoded_alike(net, hf, VOCAB)


def test_a_folder_andrea_cannot_read_is_refused_in_one_line(olmo, tmp_path):
    _, _, _, folder = olmo
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(HFFolderError, match="model_type='gpt2', not 'olmo3'; give a Hugging Face folder of OLMo 3"):
        load_olmo3(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 3, "layer_types": None}))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(HFFolderError, match="tensor 'model.layers.3.mlp.down_proj.weight' is not part of OLMo 3"):
        load_olmo3(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "olmo3")
    assert result.status == "completed" and result.global_step == 5 and alike
