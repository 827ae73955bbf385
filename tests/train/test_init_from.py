"""andrea-train init_from=<GPT-2 folder>: the run's network takes GPT-2's shape and starts from its weights."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from andrea.models.files.checkpoint import read_checkpoint
from andrea.train.config import ConfigError, validate
from andrea.train.pipeline import _load_init_from, train
from tests.compose import QUICK, compose_train


def hf_folder(folder):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=101, n_positions=64, n_embd=48, n_layer=2, n_head=4)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


def test_fine_tuning_starts_from_gpt2_s_weights(tmp_path):
    hf = hf_folder(tmp_path / "gpt2")
    cfg = compose_train(tmp_path / "run", [*QUICK, f"init_from={tmp_path / 'gpt2'}", "attention=eager"])
    parts = validate(cfg)
    net = cfg.model.net
    assert (net._target_, net.bias, net.activation, net.d_model, net.n_layer) == (
        "andrea.models.gpt.GPT",
        True,
        "gelu_tanh",
        48,
        2,
    )
    assert (net.attention.backend, net.attention.n_head, net.attention.n_kv_head) == (
        "eager",
        4,
        4,
    )  # the run's backend
    module = parts.module
    _load_init_from(module.net, cfg.init_from)
    idx = torch.randint(64, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(module.net.eval()(idx)[0], hf(idx).logits, atol=1e-4, rtol=1e-4)
    result = train(cfg, parts)
    assert result.status == "completed"
    saved = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["andrea_net_config"]
    assert saved["bias"] is True and saved["activation"] == "gelu_tanh"  # the checkpoint describes itself


def test_init_from_refuses_in_one_line(tmp_path):
    empty, folder = tmp_path / "empty", tmp_path / "gpt2"
    empty.mkdir()
    hf_folder(folder)
    for overrides, message in [
        ([f"init_from={empty}"], f"init_from={empty}: {empty} has no model.safetensors"),
        ([f"init_from={folder}", "position=rope"], "GPT-2's weights need learned positions; drop position=rope"),
    ]:
        cfg = compose_train(tmp_path / "run", [*QUICK, *overrides])
        with pytest.raises(ConfigError) as refused:
            validate(cfg)
        assert message in str(refused.value) and "\n" not in str(refused.value)
