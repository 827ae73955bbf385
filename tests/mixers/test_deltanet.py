"""DeltaNet and Gated DeltaNet as layers (andrea.mixers.deltanet): their implied weights are signed and are what
they compute, Gated DeltaNet's decay starts where the paper starts it, generation from their state is recomputing
in a hybrid layout, and they train from the command line with maps."""

from __future__ import annotations

import pytest
import torch

from andrea.mixers.deltanet import DeltaNet, GatedDeltaNet
from andrea.models.generate import generate
from andrea.models.gpt import GPT
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train

D, T = 16, 19
MIXERS = {"deltanet": DeltaNet, "gated_deltanet": GatedDeltaNet}


@pytest.mark.parametrize("name", MIXERS)
def test_the_implied_weights_are_signed_and_are_what_the_layer_computes(name):
    """Without gate, norm or convolution, y = W_O (A V), and some weights are negative: the delta rule takes
    back what a key wrote before."""
    torch.manual_seed(0)
    layer = MIXERS[name](D, 64, n_head=4, conv=False, gate=False, norm=False, expand_v=1.0).double()
    x = torch.randn(2, T, D, dtype=torch.float64)
    y, weights = layer(x, return_weights=True)
    assert weights is not None and (weights < 0).any() and layer.signed
    v = layer.v_proj(x).view(2, T, 4, -1).transpose(1, 2)
    torch.testing.assert_close(y, layer.proj((weights @ v).transpose(1, 2).reshape(2, T, -1)))


def test_gated_deltanet_s_decay_starts_as_published():
    """A = exp(A_log) in (0, 16], softplus(dt_bias) in [1e-3, 1e-1]: every log decay is in [-1.6, 0)."""
    torch.manual_seed(0)
    layer = GatedDeltaNet(D, 64, n_head=4)
    assert (layer.A_log.exp() <= 16).all() and (layer.A_log.exp() > 0).all()
    dt = torch.nn.functional.softplus(layer.dt_bias)
    assert (dt >= 1e-3 - 1e-9).all() and (dt <= 1e-1 + 1e-9).all()
    g = layer.log_decay(torch.zeros(1, 3, D))
    assert g.shape == (1, 4, 3) and (g < 0).all() and (g >= -16 * 0.1 - 1e-6).all()


@pytest.mark.parametrize("name", MIXERS)
def test_generation_from_the_state_is_recomputing(name):
    torch.manual_seed(0)
    net = GPT(vocab_size=17, max_context=40, n_layer=4, d_model=D, attention=dict(n_head=4),
              mixer={"name": name, "n_head": 4}, layout=[name, name, name, "attention"])  # fmt: skip
    idx = torch.randint(0, 17, (2, 5))
    cached = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0))
    recomputed = generate(net, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0), use_cache=False)
    assert torch.equal(cached, recomputed)


def test_gated_deltanet_trains_from_the_command_line_with_maps(tmp_path):
    overrides = [*QUICK, "mixer=gated_deltanet", "trainer.max_steps=3"]
    result = train(compose_train(tmp_path, overrides))
    assert result.status == "completed" and result.global_step == 3
    assert "layer0_step000003.png" in {p.name for p in (tmp_path / "attention_maps").glob("*.png")}
    assert result.cache_bytes is not None and result.cache_bytes["layers"][0]["mixer"] == "gated_deltanet"


def test_the_hybrid_preset_is_qwen3_next_s_pattern(tmp_path):
    """model=andrea-12m-hybrid: 8 layers, three Gated DeltaNet layers to each attention layer, as its file says."""
    from hydra.utils import instantiate

    cfg = compose_train(tmp_path, ["experiment=andrea-12m-shakespeare", "model=andrea-12m-hybrid"])
    net = instantiate(cfg.model.net, _convert_="partial")
    assert [type(m).__name__ for m in net.mixers] == ["GatedDeltaNet"] * 3 + ["MultiHeadSelfAttention"] + [
        "GatedDeltaNet"
    ] * 3 + ["MultiHeadSelfAttention"]
    assert sum(p.numel() for p in net.parameters()) == 14_158_152
    assert net.mixers[0].cache_size().per_sequence == 14_592 and net.mixers[3].cache_size().per_token == 384


def test_an_andrea_gpt_with_mixers_trains_to_its_summary(tmp_path):
    """A GPT whose layers are Gated DeltaNet and attention: the summary gives each layer's cache, no KV cache line."""
    overrides = [*QUICK, "model=andrea-tiny", "mixer=gated_deltanet", "model.net.layout=[gated_deltanet,attention]"]
    result = train(compose_train(tmp_path, [*overrides, "trainer.max_steps=2", "~callbacks.attention_maps"]))
    assert result.status == "completed" and result.kv_cache is None
    assert result.cache_bytes is not None
    assert [layer["mixer"] for layer in result.cache_bytes["layers"]][:2] == ["gated_deltanet", "attention"]
