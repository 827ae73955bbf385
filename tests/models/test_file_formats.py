"""Files saved before a change to the math (format 1: no format recorded) are read with the settings that give
the math they were trained with, or refused in one line naming the setting; never loaded into the new math."""

import json
from typing import Any, cast

import pytest
import torch
from omegaconf import OmegaConf
from safetensors import safe_open
from safetensors.torch import save_model

from andrea.attention.latent import LatentAttention
from andrea.models.files import export
from andrea.models.files.build import build
from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, load_checkpoint
from andrea.models.files.formats import CHECKPOINT_FORMAT_KEY, FORMAT, METADATA_FORMAT_KEY
from andrea.models.files.load import load_any
from andrea.models.files.schema import ModelFileError, parse
from andrea.models.network import network
from andrea.train.config import ConfigError, validate
from tests.compose import compose_train

GPT = {"_target_": "andrea.models.gpt.GPT", "vocab_size": 61, "max_context": 16, "n_layer": 2, "d_model": 32}


def net_of(config: dict[str, Any]) -> torch.nn.Module:
    torch.manual_seed(0)
    return build(parse(config, "test", "net")).eval()


def format_1_export(net: torch.nn.Module, config: dict[str, Any], path) -> Any:
    """What andrea's export wrote before it recorded a format: the config alone in the metadata."""
    save_model(net, str(path), metadata={export.CONFIG_KEY: json.dumps(config)})
    return path


def latent_of(net: torch.nn.Module) -> LatentAttention:
    latent = network(net).attention[0].latent
    assert latent is not None
    return latent


def same_outputs(loaded: torch.nn.Module, net: torch.nn.Module) -> None:
    idx = torch.randint(61, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(network(loaded)(idx)[0], network(net)(idx)[0])


def test_a_format_1_gated_model_keeps_the_gate_s_bias(tmp_path):
    old = {**GPT, "attention": {"n_head": 4, "mechanism": {"name": "gated"}}}  # bias false, as the file says
    net = net_of({**old, "attention": {"n_head": 4, "mechanism": {"name": "gated", "gate_bias": True}}})  # old math
    loaded, config, _ = load_any(format_1_export(net, old, tmp_path / "gated.safetensors"))
    assert config["attention"]["mechanism"] == {"name": "gated", "gate_bias": True}
    same_outputs(loaded, net)
    new = net_of(old)  # the same config written today: a gate without a bias
    assert network(new).attention[0].mechanism.get_submodule("gate").bias is None
    with safe_open(str(export.save(new, old, tmp_path / "new.safetensors")), framework="pt") as f:
        assert (f.metadata() or {})[METADATA_FORMAT_KEY] == str(FORMAT)
    assert export.load(tmp_path / "new.safetensors")[1] == old  # today's file: read as written


def test_a_format_1_latent_model_keeps_torch_s_default_eps(tmp_path):
    latent = {"kv_rank": 8, "rope_dim": 4, "q_rank": 16}
    old = {**GPT, "position": "rope", "attention": {"n_head": 4, "latent": latent}}
    net = net_of({**old, "attention": {"n_head": 4, "latent": latent | {"norm_eps": None}}})
    loaded, config, _ = load_any(format_1_export(net, old, tmp_path / "mla.safetensors"))
    assert config["attention"]["latent"]["norm_eps"] is None
    assert latent_of(loaded).kv_norm.eps is None
    same_outputs(loaded, net)
    assert latent_of(net_of(old)).kv_norm.eps == 1e-6  # the same config today


def test_a_format_1_differential_model_with_rope_is_refused_in_one_line(tmp_path):
    old = {**GPT, "position": "rope", "attention": {"n_head": 4, "backend": "eager", "mechanism": "diff"}}
    path = format_1_export(net_of(old), old, tmp_path / "diff.safetensors")
    with pytest.raises(ModelFileError) as refused:
        load_any(path)
    message = str(refused.value)
    assert "\n" not in message and "mechanism=diff" in message and "position=rope" in message
    assert "format 1" in message and "train it again" in message
    learned = {**old, "position": "learned"}  # without RoPE the math did not change: read as it is
    load_any(format_1_export(net_of(learned), learned, tmp_path / "diff-learned.safetensors"))


def test_a_format_1_checkpoint_is_read_with_its_settings_and_a_newer_one_refused(tmp_path):
    old = {**GPT, "attention": {"n_head": 4, "mechanism": "gated"}}
    net = net_of({**old, "attention": {"n_head": 4, "mechanism": {"name": "gated", "gate_bias": True}}})
    state: dict[str, Any] = {
        CHECKPOINT_CONFIG_KEY: old,
        "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
    }
    torch.save(state, tmp_path / "old.ckpt")
    loaded, config, _ = load_checkpoint(tmp_path / "old.ckpt")
    assert config["attention"]["mechanism"] == {"name": "gated", "gate_bias": True}
    same_outputs(loaded, net)
    torch.save(state | {CHECKPOINT_FORMAT_KEY: FORMAT + 1}, tmp_path / "newer.ckpt")
    with pytest.raises(ValueError, match=rf"andrea_format={FORMAT + 1} must be an integer in \[1, {FORMAT}\].*upgrade"):
        load_checkpoint(tmp_path / "newer.ckpt")


def test_resuming_a_format_1_gated_run_names_the_setting_that_keeps_its_math(tmp_path):
    composed = compose_train(tmp_path, ["mechanism=gated"])
    saved = cast(dict[str, Any], OmegaConf.to_container(composed.model.net, resolve=True))
    del saved["attention"]["mechanism"]["gate_bias"]  # what a format 1 run saved
    net = net_of({**saved, "attention": {**saved["attention"], "mechanism": {"name": "gated", "gate_bias": True}}})
    state = {CHECKPOINT_CONFIG_KEY: saved, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}
    torch.save(state, tmp_path / "last.ckpt")
    with pytest.raises(ConfigError, match=r"mechanism\.gate_bias=True, this run builds .*gate_bias=None"):
        validate(compose_train(tmp_path, ["mechanism=gated", f"ckpt_path={tmp_path / 'last.ckpt'}"]))
    validate(
        compose_train(tmp_path, ["mechanism=gated", "mechanism.gate_bias=true", f"ckpt_path={tmp_path}/last.ckpt"])
    )


def test_a_checkpoint_written_today_records_its_format(default_run):
    _, run_dir = default_run
    state = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state[CHECKPOINT_FORMAT_KEY] == FORMAT


def test_crafted_weights_and_settings_are_refused_in_one_line_naming_the_field(tmp_path):
    """An export whose sink logits are nan or inf, or whose QK-norm eps is -1 or "abc": one line naming the file
    and the field, before the network answers anything."""
    sink = {**GPT, "attention": {"n_head": 4, "backend": "eager", "mechanism": "sink"}}
    net = net_of(sink)
    for bad in (float("nan"), float("inf")):
        with torch.no_grad():
            network(net).attention[1].mechanism.get_parameter("sink")[2] = bad
        path = export.save(net, sink, tmp_path / "sink.safetensors")
        with pytest.raises(ModelFileError, match=r"sink.safetensors: tensor blocks.1.attention.mechanism.sink holds "
                                                 r"nan or inf; give a file of a healthy run$"):  # fmt: skip
            load_any(path)
    qknorm = {**GPT, "attention": {"n_head": 4, "mechanism": {"name": "qknorm"}}}
    for eps in (-1, "abc"):
        crafted = {**qknorm, "attention": {"n_head": 4, "mechanism": {"name": "qknorm", "eps": eps}}}
        path = export.save(net_of(qknorm), crafted, tmp_path / "qknorm.safetensors")
        with pytest.raises(ModelFileError, match=rf"qknorm.safetensors: andrea.model.net: mechanism.eps={eps!r} must "
                                                 r"be a finite number > 0"):  # fmt: skip
            load_any(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.update(optimizer_states=[]), "optimizer_states is empty, so a resume would restart the optimizer"),
        (lambda s: s["optimizer_states"][0]["param_groups"][0].update(lr="abc"),
         r"optimizer_states\[0\].param_groups\[0\].lr='abc' is not a finite number"),
        (lambda s: s["optimizer_states"][0]["state"][0].update(exp_avg=torch.zeros(3, 7)),
         r"optimizer_states\[0\].state\[0\] does not fit any weight of the model"),
    ],
)  # fmt: skip
def test_a_checkpoint_s_optimizer_state_is_checked(default_run, tmp_path, change, message):
    state = torch.load(default_run[1] / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    change(state)
    torch.save(state, tmp_path / "crafted.ckpt")
    with pytest.raises(ValueError, match=rf"crafted.ckpt: {message}; give a checkpoint written by andrea-train$"):
        load_checkpoint(tmp_path / "crafted.ckpt")
