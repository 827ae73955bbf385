"""One attention spec (andrea.attention.spec): each setting's default and rule written once, read by the
config checks, the model-file schema and the block alike, each naming the setting its own way."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.spec import AttentionSpec
from andrea.models.files import schema
from andrea.train.config import ConfigError, validate
from andrea.utils.rules import SettingError
from tests.compose import CONF, compose_train


def test_the_block_s_defaults_are_the_spec_s():
    assert MultiHeadSelfAttention(16, 4).spec == AttentionSpec(d_model=16, n_head=4)
    assert MultiHeadSelfAttention(16, 4, 2, backend="eager").spec == AttentionSpec(16, 4, 2, backend="eager")


def test_the_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        AttentionSpec(16, 4).n_head = 2  # type: ignore[misc]


def test_the_config_and_the_files_hold_the_spec_s_settings():
    """train.yaml's attention_block (model.net.attention) and a file's `attention` hold exactly the settings the
    spec has beside the network's sizes."""
    block = OmegaConf.load(CONF / "train.yaml").attention_block
    assert tuple(block) == AttentionSpec.settings() == schema.ATTENTION_FIELDS


def test_one_rule_each_reader_naming_the_setting_its_own_way(tmp_path):
    """Grouped heads that do not divide: the config names the groups, a file its own keys, the block the groups."""
    with pytest.raises(ConfigError, match=r"^heads\.n_kv_head=3 does not divide heads\.n_head=4; choose one of"):
        validate(compose_train(tmp_path, ["heads.n_kv_head=3"]))
    config = {"_target_": "andrea.models.toy.ToyModel", "vocab_size": 8, "max_context": 8,
              "attention": {"n_head": 4, "n_kv_head": 3}}  # fmt: skip
    with pytest.raises(schema.ModelFileError, match=r"^f: net\.attention\.n_kv_head=3 does not divide net\.attention"):
        schema.parse(config, "f", "net")
    with pytest.raises(SettingError, match=r"^heads\.n_kv_head=3 does not divide heads\.n_head=4"):
        MultiHeadSelfAttention(32, 4, 3)


def test_a_setting_the_spec_lacks_is_refused_with_the_closest(tmp_path):
    with pytest.raises(SettingError, match=r"^backnd is not an attention setting \(did you mean backend\?\)"):
        MultiHeadSelfAttention(32, 4, backnd="eager")
    with pytest.raises(SettingError, match="heads.n_head is missing"):
        AttentionSpec.read({"d_model": 32})
