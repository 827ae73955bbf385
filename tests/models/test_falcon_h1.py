"""Falcon-H1 as andrea builds it (conf/model/falcon-h1.yaml; andrea.models.files.falcon_h1) against transformers'
own model code (FalconH1ForCausalLM, its pure-PyTorch Mamba-2 scan and eager attention on CPU; µP multipliers at
1), on the same random weights: transformers writes the folder, andrea's loader reads it as data, and both networks
compute the same function: the logits, each layer (attention and Mamba-2 side by side), every gradient, and the
tokens decoded one at a time from their caches (tests/models/hf_parity.py); the layer's two mixers stay two to the
lens and the maps."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from transformers import FalconH1Config, FalconH1ForCausalLM

from andrea.models.files.falcon_h1 import load_falcon_h1, state_dict
from andrea.models.files.hf_folder import HFFolderError
from andrea.models.network import network
from andrea.models.weight_styles import weight_styles
from tests.models.hf_parity import decoded_alike, layer_errors, logits_error, preset_trained, saved, worst_gradient

CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=64, mamba_d_ssm=128, mamba_n_heads=4,
    mamba_d_head=32, mamba_d_state=16, mamba_n_groups=1, mamba_chunk_size=16,
)  # fmt: skip  # GQA beside Mamba-2, a scan chunk shorter than the sequences
VOCAB = CONFIG["vocab_size"]


@pytest.fixture(scope="module")
def falcon(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("falcon_h1")
    model = FalconH1ForCausalLM(FalconH1Config(**CONFIG | {"attn_implementation": "eager"}))
    # Decay rates exp(A_log) in [0.05, 0.5], where a state lives a few tokens: at transformers' init (1 to 4, a
    # step near 1.3) the state forgets within a token or two and its decay's gradients sink into float32's rounding.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mamba.A_log.copy_(torch.empty(4).uniform_(0.05, 0.5).log())
    hf = saved(model, folder)
    net, config = load_falcon_h1(folder)
    return hf, net, config, folder


def test_every_layer_is_attention_and_mamba2_side_by_side(falcon):
    _, net, _, _ = falcon
    specs = network(net).layer_specs
    assert [(spec.kind, spec.mixer) for spec in specs] == [("hybrid", "parallel")] * 2
    assert [(part.mixer, part.cache) for part in specs[0].parts] == [("attention", "keys and values"),
                                                                     ("mamba2", "state")]  # fmt: skip
    assert specs[0].cache == "keys and values + state" and specs[0].n_head == 8


def test_the_lens_and_the_maps_show_the_two_mixers(falcon):
    _, net, _, _ = falcon
    points = network(net).hook_points()
    assert {"blocks.0.attn.attention.hook_pattern", "blocks.0.attn.ssm.hook_state"} <= set(points)
    _, weights = net(torch.randint(0, VOCAB, (1, 6)), return_weights=True)
    assert [tuple(w.shape) for w in weights] == [(1, 8, 6, 6)] * 2  # 4 attention heads, then 4 Mamba-2 heads
    assert torch.allclose(weights[0][:, :4].sum(-1), torch.ones(1, 4, 6))  # softmax rows first
    style = weight_styles(network(net))[0]
    assert style.label == "softmax+mamba2" and style.meaning.startswith("heads 0-3 attention (softmax)")
    assert "heads 4-7 ssm (mamba2)" in style.meaning


def test_the_logits_equal_transformers(falcon):
    hf, net, _, _ = falcon
    assert logits_error(net, hf, VOCAB) <= 1e-5


def test_each_layer_equals_transformers_forward_and_backward(falcon):
    hf, net, _, _ = falcon
    errors = layer_errors(net, hf, VOCAB)
    assert len(errors) == 2 and max(max(pair) for pair in errors) <= 1e-5, errors


def test_every_gradient_equals_transformers(falcon):
    hf, net, _, _ = falcon
    worst, error = worst_gradient(net, hf, VOCAB, lambda grads: state_dict(grads, 2, False, "grads"))
    assert error <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(falcon):
    hf, net, _, _ = falcon
    assert decoded_alike(net, hf, VOCAB)


def test_multipliers_andrea_does_not_build_are_refused_in_one_line(falcon, tmp_path):
    _, _, _, folder = falcon
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"embedding_multiplier": 5.66}))
    with pytest.raises(HFFolderError, match="embedding_multiplier is not 1; andrea reads Falcon-H1 with its µP"):
        load_falcon_h1(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config | {"mamba_n_groups": 2}))
    with pytest.raises(HFFolderError, match="andrea's Mamba-2 has one group of B and C"):
        load_falcon_h1(tmp_path)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "falcon-h1")
    assert result.status == "completed" and result.global_step == 5 and alike
