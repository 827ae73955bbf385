"""A mixer's settings are typed once (its constructor, narrowed by its `setting_rules`) and refused by that one
description wherever the layers are worked out: the config checks, a model file's schema and the build. A mixer
too big for memory is refused by its estimate, which counts every layer's own mixer."""

from __future__ import annotations

import math

import pytest

from andrea.mixers.layer_spec import resolve_layers
from andrea.mixers.layers import PLACE, mixer_registry
from andrea.mixers.settings import setting_rules
from andrea.models import memory
from andrea.models.files import schema
from andrea.models.files.build import build
from andrea.train.config import ConfigError, validate
from andrea.utils.rules import SettingError
from tests.compose import compose_train

# (mixer, setting, value, the words its refusal ends with): the hostile cases, kept and rerun every round
HOSTILE = [
    *[("gla", "chunk", value, "must be a positive integer") for value in (1.5, "abc", None, 0, -1, True)],
    ("gla", "n_head", 0, "must be a positive integer"),
    *[("gla", "expand_k", value, "must be a finite number > 0") for value in (math.inf, -1, math.nan)],
    ("retention", "expand_v", 0, "must be a finite number > 0"),
    ("deltanet", "expand_v", 0.0, "must be a finite number > 0"),
    *[("mamba2", "d_state", value, "must be a positive integer") for value in (-4, 0)],
    *[("mamba2", "expand", value, "must be a positive integer") for value in (1.5, 0)],
    ("linear", "normalize", "maybe", "must be true or false"),
    ("mamba2", "conv", "maybe", "must be true or false"),
    ("gated_deltanet", "gate", 2, "must be true or false"),
    ("gla", "form", "fast", "must be one of parallel, chunked, recurrent"),
    ("linear", "feature_map", "relu", "must be one of elu1, identity, elementwise_product"),
]


@pytest.mark.parametrize("name, key, value, words", HOSTILE, ids=[f"{n}.{k}={v!r}" for n, k, v, _ in HOSTILE])
def test_a_mixer_setting_out_of_its_type_or_range_is_refused_by_name(name, key, value, words):
    with pytest.raises(SettingError) as refused:
        resolve_layers(None, 2, {"name": name, key: value})
    assert refused.value.key == f"mixer.{key}"
    assert str(refused.value) == f"mixer.{key}={value!r} {words} (a setting of mixer {name})"


def test_every_built_in_mixer_types_each_of_its_settings():
    """No built-in setting goes unchecked: each has a rule from its annotation or the mixer's own table."""
    for name in mixer_registry.builtins:
        if name == "attention":
            continue
        cls = mixer_registry.load(name)
        import inspect

        settings = set(inspect.signature(cls).parameters) - set(PLACE)
        assert set(setting_rules(cls, PLACE)) == settings, name


def test_the_config_checks_refuse_a_bad_mixer_setting_before_anything_is_built(tmp_path):
    cfg = compose_train(tmp_path, ["mixer=gla", "mixer.chunk=1.5", "~callbacks.attention_maps"])
    with pytest.raises(ConfigError, match=r"^mixer\.chunk=1\.5 must be a positive integer \(a setting of mixer gla\)$"):
        validate(cfg)


def test_a_model_file_with_a_bad_mixer_setting_is_refused_by_its_schema():
    config = {"_target_": "andrea.models.gpt.GPT", "vocab_size": 16, "max_context": 8, "n_layer": 1, "d_model": 16,
              "attention": {"n_head": 2}, "mixer": {"name": "mamba2", "d_state": -4}}  # fmt: skip
    with pytest.raises(schema.ModelFileError, match=r"f: net\.mixer\.d_state=-4 must be a positive integer"):
        schema.parse(config, "f", "net")


@pytest.mark.parametrize(
    "mixer",
    [{"name": "deltanet"}, {"name": "mamba2", "d_state": 8, "expand": 1}, {"name": "gla", "expand_k": 1.0},
     {"name": "linear", "feature_map": "elementwise_product", "normalize": False}, {"name": "retention"}],
)  # fmt: skip
def test_the_estimate_counts_every_layer_s_own_mixer(mixer):
    """The parameter count the memory line prints is the trained model's, for hybrids too."""
    config = {"_target_": "andrea.models.gpt.GPT", "vocab_size": 64, "max_context": 16, "n_layer": 2, "d_model": 32,
              "attention": {"n_head": 4}, "mixer": mixer, "layout": [mixer["name"], "attention"]}  # fmt: skip
    spec = schema.parse(config, "test", "net")
    assert memory.parameters(spec) == sum(p.numel() for p in build(spec).parameters())


def test_a_mixer_too_big_for_memory_is_refused_by_its_setting(tmp_path):
    """Mamba-2 with ten million state rows: 164 GB asked at allocation before, refused by its estimate now."""
    cfg = compose_train(tmp_path, ["mixer=mamba2", "mixer.d_state=10000000", "~callbacks.attention_maps"])
    with pytest.raises(ConfigError, match=r"^mixer\.d_state=10000000: training needs about .* of memory on cpu"):
        validate(cfg)


def test_a_mixer_no_tensor_can_hold_is_refused_by_its_setting(tmp_path):
    cfg = compose_train(tmp_path, ["mixer=gla", "mixer.expand_k=1e300", "~callbacks.attention_maps"])
    with pytest.raises(ConfigError, match=r"^mixer\.expand_k=1e\+300: mixer gla cannot be built \(.*\); lower it$"):
        validate(cfg)


def test_a_mixer_default_is_written_once_in_its_class():
    """Each mixer group names its settings and takes their values from the class (${andrea.class_default:}), or
    links them to another group (n_head: the heads group's): no value is written in both places."""
    from omegaconf import OmegaConf

    from tests.compose import CONF, group_options

    for option in group_options("mixer"):
        node = OmegaConf.to_container(OmegaConf.load(CONF / "mixer" / f"{option}.yaml"), resolve=False)
        assert isinstance(node, dict)
        written = {key: value for key, value in node.items() if key != "name"}
        literal = {key: value for key, value in written.items() if not str(value).startswith("${")}
        assert not literal, f"conf/mixer/{option}.yaml writes {literal}; give ${{andrea.class_default:}}"
