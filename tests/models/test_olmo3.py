"""OLMo 3 as andrea builds it (conf/model/olmo3.yaml; andrea.models.files.olmo3) against transformers' own model
code (Olmo3ForCausalLM, its eager attention on CPU), on the same random weights: transformers writes the folder,
andrea's loader reads it as data and maps the tensors, and both networks compute the same function: the logits,
every gradient, the pattern of layer kinds, and the tokens decoded one at a time from their caches."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from torch import Tensor
from transformers import Olmo3Config, Olmo3ForCausalLM

from andrea.models.files.hf_folder import HFFolderError
from andrea.models.files.load import load_any
from andrea.models.files.olmo3 import KINDS, load_olmo3, state_dict
from andrea.models.generate import generate
from andrea.models.network import network
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train

ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 500000.0}}  # fmt: skip
CONFIG: dict[str, Any] = dict(
    vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, sliding_window=4, rms_norm_eps=1e-6, rope_parameters=ROPE,
)  # fmt: skip  # GQA, a window shorter than the sequences, two RoPE bases


def relative(got: Tensor, want: Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


@pytest.fixture(scope="module")
def olmo(tmp_path_factory):
    """transformers' OLMo 3 with random weights (norm gains too, away from 1), saved as a user downloads one."""
    torch.manual_seed(0)
    hf = Olmo3ForCausalLM(Olmo3Config(**CONFIG | {"attn_implementation": "eager"})).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("olmo3")
    hf.save_pretrained(folder)
    net, config = load_olmo3(folder)
    return hf, net, config, folder


def test_the_layer_kinds_follow_layer_types(olmo):
    hf, net, config, _ = olmo
    assert [spec.kind for spec in network(net).layer_specs] == [KINDS[t] for t in hf.config.layer_types]
    assert [spec.cache for spec in network(net).layer_specs] == ["keys and values, last 4 tokens"] * 3 + [
        "keys and values"
    ]


def test_the_logits_equal_transformers(olmo):
    hf, net, _, _ = olmo
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert relative(net(ids)[0], hf(ids).logits) <= 1e-5


def test_every_gradient_equals_transformers(olmo):
    """The same loss backward through both: each of transformers' gradients, mapped by the loader's own map,
    equals andrea's."""
    hf, net, config, _ = olmo
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 20), generator=torch.Generator().manual_seed(2))
    targets = torch.randint(0, CONFIG["vocab_size"], (2, 20), generator=torch.Generator().manual_seed(3))
    for model, logits in ((net, lambda: net(ids)[0]), (hf, lambda: hf(ids).logits)):
        model.zero_grad()
        torch.nn.functional.cross_entropy(logits().flatten(0, 1), targets.flatten()).backward()
    theirs = state_dict({name: p.grad for name, p in hf.named_parameters()}, 4, False, "grads")
    ours = {name: p.grad for name, p in net.named_parameters()}
    assert set(theirs) == set(ours)
    worst = max(theirs, key=lambda name: relative(ours[name], theirs[name]))
    assert relative(ours[worst], theirs[worst]) <= 1e-5, worst


def test_tokens_decoded_from_the_caches_equal_transformers(olmo):
    """Greedy decoding, one token at a time from each side's cache, 12 steps past a window of 4."""
    hf, net, _, _ = olmo
    prompt = torch.randint(0, CONFIG["vocab_size"], (1, 5), generator=torch.Generator().manual_seed(4))
    ours = generate(net, prompt, 12, top_k=1)
    theirs = hf.generate(prompt, max_new_tokens=12, do_sample=False, min_new_tokens=12, pad_token_id=0)
    assert torch.equal(ours, theirs)


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
    result = train(compose_train(tmp_path, [*QUICK, "model=olmo3", "data.num_train=320", "trainer.max_steps=5",
                                            "validate=false"]))  # fmt: skip
    assert result.status == "completed" and result.global_step == 5
    module = load_any(tmp_path / "checkpoints" / "last.ckpt", "cpu")[0]
    prompt = torch.tensor([[1, 2, 3]])
    cached = generate(module, prompt, 24, top_k=1)
    assert torch.equal(cached, generate(module, prompt, 24, top_k=1, use_cache=False))
