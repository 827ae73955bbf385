"""A model file carries data, never code: a config that names anything but andrea's own models,
masks and backends is refused by every reader, in one line, with nothing done on disk."""

import json
import os
import pickle
import re
import subprocess
import sys
from typing import Any, cast

import pytest
import torch
from safetensors.torch import save_model

from andrea.attention import SlidingWindow
from andrea.models import memory
from andrea.models.files import export
from andrea.models.files import schema as net_config
from andrea.models.files.build import build
from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, export_checkpoint, load_checkpoint
from andrea.models.files.load import load_any
from andrea.models.network import network
from andrea.train.config import ConfigError, validate
from tests.compose import compose_train


class Payload:
    def __reduce__(self):
        return (open, (os.environ["ANDREA_MARKER"], "w"))  # what a malicious pickle would do


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """A folder of files a payload would touch, and a way to assert that none was touched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    marker = tmp_path / "payload-ran"
    monkeypatch.setenv("ANDREA_MARKER", str(marker))
    with open(tmp_path / "payload.ckpt", "wb") as f:
        pickle.dump(Payload(), f)

    def untouched():
        assert victim.read_text() == "precious"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["payload.ckpt", "victim.txt", "weights"]

    (tmp_path / "weights").mkdir()
    return tmp_path, untouched


def payloads(tmp_path, good: dict) -> dict[str, object]:
    """Configs that would run code if handed to hydra.utils.instantiate."""
    victim, made = str(tmp_path / "victim.txt"), str(tmp_path / "made")
    nested_mask = {**good, "attention": {**good["attention"], "mask": {"_target_": "os.makedirs", "name": made}}}
    nested_option = {
        **good,
        "attention": {**good["attention"], "backend_options": {"x": {"_target_": "os.makedirs", "name": made}}},
    }
    nested_mechanism = {
        **good,
        "attention": {**good["attention"], "mechanism": {"_target_": "os.makedirs", "name": made}},
    }
    return {
        "torch.load": {"_target_": "torch.load", "f": str(tmp_path / "payload.ckpt"), "weights_only": False},
        "builtins.open": {"_target_": "builtins.open", "file": victim, "mode": "w"},
        "shutil.copyfile": {"_target_": "shutil.copyfile", "src": victim, "dst": str(tmp_path / "copy.txt")},
        "os.makedirs": {"_target_": "os.makedirs", "name": made},
        "subprocess.run": {"_target_": "subprocess.run", "args": ["touch", str(tmp_path / "touched")]},
        "nested mask": nested_mask,
        "nested option": nested_option,
        "nested mechanism": nested_mechanism,
        "extra key": {**good, "callback": {"_target_": "os.makedirs", "name": made}},
        "a list": [good],
    }


MESSAGES = {
    "torch.load": "andrea_net_config._target_='torch.load' is not one of andrea's models",
    "builtins.open": "._target_='builtins.open' is not one of andrea's models",
    "shutil.copyfile": "._target_='shutil.copyfile' is not one of andrea's models",
    "os.makedirs": "._target_='os.makedirs' is not one of andrea's models",
    "subprocess.run": "._target_='subprocess.run' is not one of andrea's models",
    "nested mask": ".attention.mask._target_='os.makedirs' is not a registered mask",
    "nested option": ".attention.backend_options must map option names to plain values",
    "nested mechanism": ".attention.mechanism={'_target_': 'os.makedirs', 'name': ",
    "extra key": ".callback is not a setting of ToyModel",
    "a list": " is a list, not a model config",
}


@pytest.fixture(scope="module")
def trained(default_run):
    checkpoint = default_run[1] / "checkpoints" / "last.ckpt"
    return checkpoint, torch.load(checkpoint, map_location="cpu", weights_only=True)


def one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message and "refused unbuilt" in message, message
    return message


@pytest.mark.parametrize("case", list(MESSAGES))
def test_every_reader_refuses_a_config_that_names_code(case, trained, disk, tmp_path):
    folder, untouched = disk
    checkpoint, state = trained
    config = payloads(folder, state[CHECKPOINT_CONFIG_KEY])[case]
    evil = folder / "weights" / "evil.ckpt"
    torch.save({**state, CHECKPOINT_CONFIG_KEY: config}, evil)
    net = load_checkpoint(checkpoint)[0]
    exported = folder / "weights" / "evil.safetensors"
    save_model(net, str(exported), metadata={export.CONFIG_KEY: json.dumps(config)})

    with pytest.raises(ConfigError) as refused:  # andrea-train's validation step (resume)
        validate(compose_train(tmp_path / "run", [f"ckpt_path={evil}"]))
    assert f"ckpt_path={evil}: " in one_line(refused) and MESSAGES[case] in str(refused.value)
    with pytest.raises(net_config.ModelFileError) as err:  # andrea-sample and the Python API
        load_any(evil)
    assert MESSAGES[case] in one_line(err)
    with pytest.raises(net_config.ModelFileError) as err:
        export.load(exported)
    assert f"{exported}: andrea.model.net" in one_line(err) and MESSAGES[case].split("_config", 1)[-1] in str(err.value)
    with pytest.raises(net_config.ModelFileError) as err:
        export_checkpoint(evil, folder / "weights" / "out.safetensors")
    assert MESSAGES[case] in one_line(err)
    assert sorted(p.name for p in (folder / "weights").iterdir()) == ["evil.ckpt", "evil.safetensors"]
    untouched()


@pytest.mark.slow  # reason: an andrea-sample process
def test_andrea_sample_refuses_it_in_one_line(trained, disk):
    folder, untouched = disk
    _, state = trained
    for case in ("torch.load", "nested mask"):
        evil = folder / "weights" / "evil.ckpt"
        torch.save({**state, CHECKPOINT_CONFIG_KEY: payloads(folder, state[CHECKPOINT_CONFIG_KEY])[case]}, evil)
        done = subprocess.run([sys.executable, "-m", "andrea.cli.sample", f"ckpt_path={evil}"], capture_output=True,
                              text=True, cwd=folder / "weights", timeout=120)  # fmt: skip
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"andrea-sample: error: ckpt_path={evil}: andrea_net_config") and MESSAGES[case] in line
        untouched()


def test_metadata_that_is_not_json_or_not_a_tokenizer(trained, tmp_path):
    net = load_checkpoint(trained[0])[0]
    save_model(net, str(tmp_path / "a.safetensors"), metadata={export.CONFIG_KEY: "{not json"})
    with pytest.raises(
        net_config.ModelFileError, match="metadata andrea.model.net is not JSON; export the model again"
    ):
        export.load(tmp_path / "a.safetensors")
    config = trained[1][CHECKPOINT_CONFIG_KEY]
    save_model(net, str(tmp_path / "b.safetensors"),
               metadata={export.CONFIG_KEY: json.dumps(config), export.TOKENIZER_KEY: "os.system"})  # fmt: skip
    with pytest.raises(
        net_config.ModelFileError, match="andrea.tokenizer='os.system' is not one of andrea's tokenizers"
    ):
        export.load(tmp_path / "b.safetensors")


def test_a_file_asking_for_more_memory_than_the_machine_has(trained, tmp_path):
    config = {**trained[1][CHECKPOINT_CONFIG_KEY], "d_model": 10**7}
    torch.save({**trained[1], CHECKPOINT_CONFIG_KEY: config}, tmp_path / "huge.ckpt")
    with pytest.raises(net_config.ModelFileError) as err:
        load_any(tmp_path / "huge.ckpt")
    message = str(err.value)
    assert message.startswith(
        f"ckpt_path={tmp_path / 'huge.ckpt'}: andrea_net_config.d_model=10000000: loading needs about "
    )
    assert "refused before allocating" in message and "\n" not in message


@pytest.mark.parametrize(
    "config",
    [
        {
            "_target_": "andrea.models.toy.ToyModel",
            "vocab_size": 64,
            "max_context": 32,
            "attention": {"n_head": 4, "mask": {"_target_": "andrea.attention.Causal"}},
        },
        {
            "_target_": "andrea.models.toy.ToyModel",
            "vocab_size": 64,
            "max_context": 32,
            "position": "none",
            "attention": None,
        },
        {
            "_target_": "andrea.models.gpt.GPT",
            "vocab_size": 97,
            "max_context": 16,
            "n_layer": 2,
            "d_model": 32,
            "position": "learned",
            "attention": {"n_head": 4, "n_kv_head": 2, "backend": "eager", "mask": "causal & sliding_window(window=4)"},
        },
        {
            "_target_": "andrea.models.gpt.GPT",
            "vocab_size": 97,
            "max_context": 16,
            "n_layer": 3,
            "d_model": 48,
            "mlp_ratio": 2,
            "position": "rope",
            "attention": {
                "n_head": 6,
                "n_kv_head": 1,
                "mask": {"_target_": "andrea.attention.PrefixLM", "prefix_len": 3},
            },
        },
    ],
    ids=["toy", "toy without attention", "gpt gqa expression mask", "gpt mqa rope prefix"],
)
def test_the_schema_builds_what_it_describes_and_counts_it(config):
    spec = net_config.parse(config, "test", "net")
    net = build(spec)
    assert memory.parameters(spec) == sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize(
    "mechanism, per_layer",
    [  # n_head 4, head_dim 8, d_model 32
        ("sigmoid", 0), ("softcap", 0), ("sink", 4), ("gated", 32 * 32), ("diff", 4 * 4 + 8), ("qknorm", 2 * 8)
    ],
)  # fmt: skip
def test_a_mechanism_s_parameters_are_counted_before_it_is_built(mechanism, per_layer):
    """A sink logit per head, the gate's Linear, λ's four vectors and the norm, QK norms: from the config alone."""
    attention = {"n_head": 4, "n_kv_head": 2, "backend": "eager", "mechanism": {"name": mechanism}}
    config = {"_target_": "andrea.models.gpt.GPT", "vocab_size": 97, "max_context": 16, "n_layer": 2, "d_model": 32}
    spec = net_config.parse(config | {"attention": attention}, "test", "net")
    softmax = net_config.parse(config | {"attention": attention | {"mechanism": "softmax"}}, "test", "net")
    assert memory.parameters(spec) == sum(p.numel() for p in build(spec).parameters())
    assert memory.parameters(spec) == memory.parameters(softmax) + 2 * per_layer


@pytest.mark.parametrize(
    "options, message",
    [
        ({"compile": 1e30}, "backend_options are not options of flex (attention.options.compile=1e+30 must be true"),
        ({"fast": True}, "backend_options are not options of flex (attention backend 'flex' takes (compile"),
    ],
)
def test_backend_options_from_a_file_are_the_backend_s_own(options, message):
    config = {
        "_target_": "andrea.models.toy.ToyModel", "vocab_size": 64, "max_context": 32,
        "attention": {"n_head": 4, "backend": "flex", "backend_options": options},
    }  # fmt: skip
    with pytest.raises(net_config.ModelFileError) as err:
        net_config.parse(config, "ckpt_path=<file>", "andrea_net_config")
    assert message in str(err.value) and "\n" not in str(err.value)


def victim_paths(state: dict, victim: str) -> dict:
    """The checkpoint with LastCheckpoint's state pointing at a file outside its folder."""
    callbacks = {name: dict(value) for name, value in state["callbacks"].items()}
    name = next(n for n in callbacks if n.startswith("LastCheckpoint"))
    callbacks[name]["last_model_path"] = f"{callbacks[name]['dirpath']}/../../{victim}"
    return {**state, "callbacks": callbacks}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: victim_paths(s, "victim.txt"), "].last_model_path='"),
        (
            lambda s: {k: v for k, v in s.items() if k != "state_dict"},
            "state_dict is missing or not a mapping of names to tensors",
        ),
        (lambda s: {**s, "state_dict": [1, 2]}, "state_dict is missing or not a mapping of names to tensors"),
        (lambda s: {**s, "optimizer_states": {"a": 1}}, "optimizer_states is a dict, not a list"),
        (lambda s: {**s, "andrea_tokenizer": ["gpt2"]}, "andrea_tokenizer=['gpt2'] is not one of andrea's tokenizers"),
        (
            lambda s: {
                **s,
                "andrea_net_config": {
                    **s["andrea_net_config"],
                    "attention": {**s["andrea_net_config"]["attention"], "mask": "causal" + " & causal" * 100},
                },
            },
            "andrea_net_config.attention.mask cannot be read (a mask expression is at most 256 characters, got 906",
        ),
    ],
    ids=[
        "callback path outside its folder",
        "no state_dict",
        "state_dict a list",
        "optimizer_states a dict",
        "tokenizer a list",
        "mask expression of 101 terms",
    ],
)
def test_a_checkpoint_s_structure_is_checked(change, message, trained, tmp_path):
    bad = tmp_path / "bad.ckpt"
    torch.save(change(trained[1]), bad)
    with pytest.raises(ValueError) as err:
        load_any(bad)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate(compose_train(tmp_path / "run", [f"ckpt_path={bad}"]))


def test_deeply_nested_metadata_is_one_line(trained, tmp_path):
    net = load_checkpoint(trained[0])[0]
    save_model(net, str(tmp_path / "deep.safetensors"), metadata={export.CONFIG_KEY: "[" * 100_000 + "]" * 100_000})
    with pytest.raises(net_config.ModelFileError, match="metadata andrea.model.net is not JSON"):
        export.load(tmp_path / "deep.safetensors")


def test_a_folder_or_an_export_is_not_a_checkpoint_to_resume(trained, tmp_path):
    with pytest.raises(ConfigError, match=f"ckpt_path={tmp_path} is not a regular file"):
        validate(compose_train(tmp_path / "run", [f"ckpt_path={tmp_path}"]))
    exported = export_checkpoint(trained[0], tmp_path / "net.safetensors")
    with pytest.raises(ConfigError, match="is a safetensors export: weights only, no training state to resume"):
        validate(compose_train(tmp_path / "run", [f"ckpt_path={exported}"]))


def test_a_mask_named_as_conf_mask_names_it_builds_and_an_unknown_name_is_refused():
    config: dict[str, Any] = {"_target_": "andrea.models.toy.ToyModel", "vocab_size": 16, "max_context": 8,
              "attention": {"n_head": 2, "mask": {"name": "sliding_window", "window": 3}}}  # fmt: skip
    mask = network(build(net_config.parse(config, "f", "net"))).attention[0].mask
    assert mask.name.startswith("sliding_window") and cast(SlidingWindow, mask).window == 3
    config["attention"]["mask"] = {"name": "os.system"}
    with pytest.raises(net_config.ModelFileError, match=r"net\.attention\.mask\.name='os.system' is not a registered"):
        net_config.parse(config, "f", "net")


def test_a_latent_attention_model_file_round_trips_and_its_sizes_are_checked(tmp_path):
    """heads=mla in a model file: plain sizes, counted before the build, exported and read back to the same
    outputs; a size that is not a positive integer or a key latent attention lacks is refused by name."""
    attention = {"n_head": 4, "backend": "sdpa", "latent": {"kv_rank": 8, "rope_dim": 4, "q_rank": 16}}
    config: dict[str, Any] = {"_target_": "andrea.models.gpt.GPT", "vocab_size": 61, "max_context": 16,
                              "n_layer": 2, "d_model": 32, "position": "rope", "attention": attention}  # fmt: skip
    spec = net_config.parse(config, "f", "net")
    net = build(spec).eval()
    assert memory.parameters(spec) == sum(p.numel() for p in net.parameters())
    path = export.save(net, config, tmp_path / "mla.safetensors")
    loaded, _, _ = load_any(path)
    idx = torch.randint(61, (2, 9))
    torch.testing.assert_close(network(loaded)(idx)[0], network(net)(idx)[0])
    assert network(loaded).attention[0].head_kind == "mla"
    for latent, message in [
        ({"kv_rank": 0}, r"net\.attention\.latent\.kv_rank=0 must be a positive integer"),
        ({"kv_rank": 8, "rank": 2}, r"net\.attention\.latent\.rank is not a setting of latent attention"),
        ([8], r"net\.attention\.latent=\[8\] must be a mapping of kv_rank, rope_dim, q_rank"),
    ]:
        with pytest.raises(net_config.ModelFileError, match=message):
            net_config.parse(config | {"attention": attention | {"latent": latent}}, "f", "net")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"layout": ["attention", "os.system"]}, "net.layout names 'os.system', which is no kind or token mixer; use"),
        (
            {"layout": ["attention"] * 3},
            "net.layout has 3 names, which does not divide net.n_layer=2; give 1 or 2 names",
        ),
        ({"mixer": {"name": "mean"}}, "net.mixer={'name': 'mean'} is not a token mixer: give mixer=<name>, one of"),
        ({"mixer": {"name": "attention", "f": [1]}}, "net.mixer must be a mapping of a mixer's name and its settings"),
        ({"attention": {"n_head": 2, "backend": ["sdpa"]}}, "net.attention.backend=['sdpa'] must be a backend's name"),
        ({"attention": {"n_head": 2, "backend": {"a": 1}}}, "net.attention.backend={'a': 1} must be a backend's name"),
        ({"mixer": {"name": "gla", "chunk": 1.5}}, "net.mixer.chunk=1.5 must be a positive integer"),
    ],
)
def test_a_file_s_mixer_and_layout_are_registered_names(change, message):
    """A file names each layer's mixer from the registry, nothing else; a layout that cannot fill the layers
    is refused before anything is built (andrea.mixers.layers)."""
    config = {"_target_": "andrea.models.toy.ToyModel", "vocab_size": 16, "max_context": 8, "n_layer": 2,
              "attention": {"n_head": 2}}  # fmt: skip
    net = network(
        build(net_config.parse(config | {"mixer": {"name": "attention"}, "layout": ["attention"]}, "f", "net"))
    )
    assert len(net.mixers) == 2
    with pytest.raises(net_config.ModelFileError) as err:
        net_config.parse(config | change, "f", "net")
    assert message in str(err.value) and "\n" not in str(err.value)
