"""MAD's compression and its autoencoder readout (model.net.readout=pooled_last, andrea.models.pooled_readout): the
rows as mad-lab makes them, the readout's sinusoids equal to mad-lab's posemb_sincos_1d as written, every position
decoded from the last position's code alone, a cache and the exports refused in one line, the task refused
without the readout before anything is built, and the task trained from the command line."""

from __future__ import annotations

import math

import pytest
import torch

from andrea.data.mad_compression import CompressionDataModule
from andrea.models.gpt import GPT
from andrea.models.pooled_readout import sinusoids
from andrea.train.config import ConfigError, validate
from tests.compose import QUICK, compose_train


def test_compression_rows_are_random_tokens_then_the_compression_token_labelled_by_themselves():
    ids, labels = CompressionDataModule(vocab_size=16, seq_len=32).make_rows(512, torch.Generator().manual_seed(0))
    assert ids.shape == (512, 32) and (ids[:, -1] == 15).all() and (ids[:, :-1] < 15).all()
    assert torch.equal(labels, ids) and len(ids[:, :-1].unique()) == 15
    with pytest.raises(ValueError, match=r"data.seq_len=1, data.vocab_size=16: compression needs a row of 2"):
        CompressionDataModule(vocab_size=16, seq_len=1)


def _mad_posemb(num_embeddings: int, embedding_dim: int) -> torch.Tensor:
    """mad-lab's posemb_sincos_1d (mad/model/layers/featurization/posemb.py), as written there."""
    half_dim = embedding_dim // 2
    rate = math.log(10000) / (half_dim - 1)
    freqs = torch.exp(torch.arange(half_dim, dtype=torch.float) * -rate)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * freqs.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
    if embedding_dim % 2 == 1:
        emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)
    return emb


@pytest.mark.parametrize("d", [64, 33])
def test_the_decoder_s_positions_are_mad_s_sinusoids(d):
    torch.testing.assert_close(sinusoids(40, d), _mad_posemb(40, d), rtol=0, atol=0)


def _net(**settings) -> GPT:
    torch.manual_seed(0)
    return GPT(vocab_size=16, max_context=32, n_layer=2, d_model=32, attention={"n_head": 4}, **settings).eval()


def test_every_position_is_decoded_from_the_last_position_s_code():
    """A change to the first token moves every position's logits (through the last position's code), and with
    the code held fixed (readout.hook_code) two different rows decode alike."""
    net = _net(readout="pooled_last")
    ids = torch.randint(15, (2, 32))
    logits, _ = net(ids)
    assert logits.shape == (2, 32, 16)
    changed = ids.clone()
    changed[:, 0] = (changed[:, 0] + 1) % 15
    assert ((net(changed)[0] - logits).abs().amax(dim=-1) > 0).all()
    assert net.readout is not None
    fixed = torch.randn(2, 32)
    net.readout.hook_code.add(lambda value, point: fixed)
    torch.testing.assert_close(net(changed)[0], net(ids)[0], rtol=0, atol=0)


def test_a_pooled_readout_refuses_a_cache_and_the_exports():
    from andrea.models.files.hf_export import does_not_fit
    from andrea.models.generate import generate

    net = _net(readout="pooled_last")
    with pytest.raises(ValueError, match=r"model.net.readout=pooled_last decodes every position from the last one"):
        net(torch.randint(15, (1, 4)), cache=net.new_cache())
    with pytest.raises(ValueError, match=r"model.net.readout=pooled_last .* it has no next token to sample"):
        generate(net, torch.randint(15, (1, 4)), 3)
    assert does_not_fit({"_target_": "andrea.models.gpt.GPT", "readout": "pooled_last", "attention": {"n_head": 4}})
    with pytest.raises(ValueError, match=r"model.net.readout"):
        _net(readout="mean")


def test_compression_without_the_pooled_readout_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(ConfigError, match=r"^data=compression needs model.net.readout=pooled_last"):
        validate(compose_train(tmp_path, ["data=compression", *QUICK]))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("data", ["recall", "induction"])
def test_the_pooled_readout_on_a_next_token_task_is_refused(tmp_path, data):
    """Its code has read every token the task's labels ask for: a loss of nothing."""
    message = rf"^model.net.readout=pooled_last decodes .* data={data}'s labels ask for; only data=compression"
    with pytest.raises(ConfigError, match=message):
        validate(compose_train(tmp_path, [f"data={data}", "model=andrea-tiny", "model.net.readout=pooled_last"]))


def test_compression_trains_with_its_preset(tmp_path):
    from hydra.core.hydra_config import HydraConfig

    from andrea.train.pipeline import train

    overrides = ["experiment=compression", "data.num_train=256", "data.num_val=64", "trainer.max_steps=4",
                 "logger=none", "callbacks.attention_maps=null"]  # fmt: skip
    result = train(compose_train(tmp_path, overrides))
    HydraConfig.instance().cfg = None
    assert result.status == "completed" and result.val_acc is not None and 0 <= result.val_acc <= 1
