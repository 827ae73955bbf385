"""gpt-oss's attention as andrea builds it (conf/model/gpt-oss.yaml; andrea.models.files.gpt_oss) against
transformers' own model code (GptOssForCausalLM, its eager attention on CPU), on the same random weights:
transformers writes the folder, andrea's loader reads it as data and maps the tensors (all but the experts', which
andrea does not build), and each layer's attention computes the same function: its output and input gradient on the
hidden states transformers hands it, and its outputs step by step as transformers decodes from its cache
(tests/models/hf_parity.py). A window of 4 and YaRN over an original context of 16 act inside the test's sequences.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import GptOssConfig, GptOssForCausalLM

from andrea.attention.positions.yarn import yarn_frequencies
from andrea.models.files.gpt_oss import load_gpt_oss_attention
from andrea.models.files.hf_folder import HFFolderError
from andrea.models.network import network
from tests.models.hf_parity import ATTENTION, cached_attention_errors, layer_errors, preset_trained, relative, saved

YARN = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 16}  # fmt: skip
CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, num_local_experts=2, num_experts_per_tok=1, max_position_embeddings=64,
    sliding_window=4, rope_parameters=YARN,
)  # fmt: skip
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("gpt_oss")
    hf = saved(GptOssForCausalLM(GptOssConfig(**CONFIG | {"attn_implementation": "eager"})), folder)
    net, config = load_gpt_oss_attention(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(gpt_oss):
    hf, net, _, _ = gpt_oss
    specs = network(net).layer_specs
    assert [spec.kind for spec in specs] == [t.split("_")[0] for t in hf.config.layer_types]
    assert [spec.cache for spec in specs] == ["keys and values, last 4 tokens", "keys and values"] * 2


def test_yarn_stretches_rope_as_transformers_does(gpt_oss):
    """andrea's YaRN frequencies and attention factor equal transformers' rotary embedding's, truncated or not."""
    hf, net, _, _ = gpt_oss
    rope = net.get_submodule("blocks.0.attention.qkv.rope")
    theirs = hf.get_submodule("model.rotary_emb")
    assert relative(rope.inv_freq, theirs.inv_freq) <= 1e-6 and rope.attention_factor == pytest.approx(
        theirs.attention_scaling, rel=1e-9
    )
    assert not torch.allclose(rope.inv_freq, 150000.0 ** (-torch.arange(0, 16, 2) / 16))  # stretched
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    truncated = GptOssConfig(**CONFIG | {"rope_parameters": YARN | {"truncate": True}})
    want, factor = ROPE_INIT_FUNCTIONS["yarn"](truncated)
    got, ours = yarn_frequencies(16, 150000.0, {"factor": 4.0, "original_context": 16, "truncate": True})
    assert relative(got, want) <= 1e-6 and ours == pytest.approx(factor)


def test_each_attention_layer_equals_transformers_forward_and_backward(gpt_oss):
    hf, net, _, _ = gpt_oss
    errors = layer_errors(net, hf, VOCAB, ATTENTION)
    assert len(errors) == 4 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_each_attention_layer_decodes_from_its_cache_as_transformers(gpt_oss):
    """12 steps past a window of 4: every step's output of every layer's attention."""
    hf, net, _, _ = gpt_oss
    errors = cached_attention_errors(net, hf, VOCAB)
    assert len(errors) == 4 and max(errors) <= 1e-5, errors


def test_a_folder_andrea_cannot_read_is_refused_in_one_line(gpt_oss, tmp_path):
    _, _, _, folder = gpt_oss
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"rope_parameters": YARN | {"rope_type": "llama3"}}))
    with pytest.raises(HFFolderError, match=r"rope_type='llama3'; andrea reads default and yarn"):
        load_gpt_oss_attention(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 2, "layer_types": None}))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(HFFolderError, match="tensor 'model.layers.2.input_layernorm.weight' is not part of gpt-oss"):
        load_gpt_oss_attention(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "gpt-oss")
    assert result.status == "completed" and result.global_step == 5 and alike
