"""The linear mixers as layers (andrea.mixers.linear, andrea.mixers.gla): their three forms give one output,
generation from their fixed-size state gives the tokens recomputing gives, their implied weights are what they
compute, and they train from the command line."""

from __future__ import annotations

import pytest
import torch

from andrea.mixers.gla import GLA
from andrea.mixers.linear import LinearAttention
from andrea.mixers.retention import Retention
from andrea.models.generate import generate
from andrea.models.gpt import GPT
from andrea.ops import gated_linear
from andrea.train.config import ConfigError, validate
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train

D, T = 32, 23
MIXERS = {"linear": LinearAttention, "gla": GLA, "retention": Retention}


def _layer(name: str, form: str, **settings):
    torch.manual_seed(0)
    return MIXERS[name](D, 64, n_head=4, form=form, chunk=8, **settings).double()


@pytest.mark.parametrize("settings", [{}, {"conv": True, "gate": True, "norm": True}], ids=["defaults", "all parts"])
@pytest.mark.parametrize("name", MIXERS)
def test_the_three_forms_give_one_output(name, settings):
    x = torch.randn(2, T, D, dtype=torch.float64)
    outputs = [_layer(name, form, **settings)(x)[0] for form in ("parallel", "chunked", "recurrent")]
    for out in outputs[1:]:
        torch.testing.assert_close(out, outputs[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", MIXERS)
def test_the_implied_weights_are_what_the_layer_computes(name):
    """Without gate, norm or convolution, y = W_O (A V): the weights the maps draw give the layer's output."""
    layer = _layer(name, "chunked", **({} if name == "linear" else {"gate": False, "norm": False}))
    x = torch.randn(2, T, D, dtype=torch.float64)
    y, weights = layer(x, return_weights=True)
    assert weights is not None and weights.shape == (2, 4, T, T)
    v = layer.v_proj(x).view(2, T, 4, -1).transpose(1, 2)
    torch.testing.assert_close(y, layer.proj((weights @ v).transpose(1, 2).reshape(2, T, -1)))
    if name == "linear":  # the paper's normalised form: each row sums to one
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, T, dtype=torch.float64))


@pytest.mark.parametrize("name", MIXERS)
def test_generation_from_the_state_is_recomputing(name):
    torch.manual_seed(0)
    net = GPT(vocab_size=17, max_context=40, n_layer=2, d_model=D, attention=dict(n_head=4),
              mixer={"name": name, "n_head": 4, "conv": True}, layout=[name, "attention"])  # fmt: skip
    idx = torch.randint(0, 17, (2, 5))
    cached = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0))
    recomputed = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0), use_cache=False)
    assert torch.equal(cached, recomputed)
    assert net.mixers[0].cache_size().at(10_000) == net.mixers[0].cache_size().at(1)  # a state: flat in T


def test_a_form_or_feature_map_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="mixer.form='fast' is not one of parallel, chunked, recurrent"):
        GLA(D, 64, form="fast")
    signed = "mixer.normalize=true needs positive features, and identity gives signed ones: use mixer.feature_map="
    with pytest.raises(ValueError, match=signed + "elu1 or mixer.normalize=false"):
        LinearAttention(D, 64, feature_map="identity")


def test_a_mixed_layout_trains_from_the_command_line_with_maps_and_head_roles(tmp_path):
    """GLA then attention: each layer's map is drawn under its own label, every head of both is scored."""
    overrides = [*QUICK, "mixer=gla", "model.net.n_layer=2", "model.net.layout=[gla,attention]", "trainer.max_steps=3"]
    result = train(compose_train(tmp_path, overrides))
    assert result.status == "completed" and result.global_step == 3
    drawn = sorted(p.name for p in (tmp_path / "attention_maps").glob("*.png"))
    assert "layer0_step000003.png" in drawn and "layer1_step000003.png" in drawn
    assert result.roles and result.verdict
    assert any(name.startswith("heads/entropy/L0H") for name in result.head_roles)  # the GLA layer's heads
    cache = result.cache_bytes  # float32 numbers: a GLA state of H·K·V = 4·4·8, and MHA's 2·d_model a token
    assert cache is not None and [layer["mixer"] for layer in cache["layers"]] == ["gla", "attention"]
    assert cache["layers"][0]["bytes"] == 4 * 4 * 4 * 8 and cache["layers"][1]["bytes"] == cache["mha_layer"]
    assert cache["mha_layer"] == 2 * 32 * cache["length"] * 4
    with pytest.raises(ConfigError, match=r"the layers' heads differ \(attention 4, gla 2\)"):
        validate(compose_train(tmp_path, [*overrides, "mixer.n_head=2"]))


def test_retention_decays_each_head_at_its_fixed_rate():
    """γ_h = 1 - 2^(-5-h): with q = k = 1, head h's weight on a key t tokens back is γ_h^t times the current
    one's (RetNet's decay, read from the implied weights; RoPE is left out here, it turns q and k alike)."""
    layer = _layer("retention", "parallel", gate=False, norm=False)
    q = torch.ones(1, 4, 6, layer.key_dim, dtype=torch.float64)
    g = layer.log_decay(torch.zeros(1, 6, D, dtype=torch.float64))
    w = gated_linear.weights(q, q, g, layer.scale)[0, :, -1]  # (H, T): the last query's weights
    for h in range(4):
        gamma = 1 - 2.0 ** (-5 - h)
        torch.testing.assert_close(w[h] / w[h, -1], gamma ** torch.arange(5, -1, -1, dtype=torch.float64))


@pytest.mark.parametrize("name", MIXERS)
def test_the_chunked_form_takes_the_chunk_it_is_given(name, chunks):
    """mixer.chunk=8 on 23 tokens: three chunks (the last padded), not the default's one."""
    _layer(name, "chunked")(torch.randn(2, T, D, dtype=torch.float64))
    assert chunks == [8, 8, 8]  # 23 tokens, the last chunk padded
