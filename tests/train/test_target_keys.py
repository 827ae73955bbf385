"""A `_target_` that is a function (model.scheduler: warmup_cosine, a partial taking the optimizer) has its keys
checked against its signature as a class's are, and looking it up logs no error."""

import logging
import re

import pytest
from omegaconf import open_dict

from andrea.train.config import ConfigError, validate
from tests.compose import compose_train

SCHEDULED = "experiment=shakespeare-chars"  # model.scheduler._target_: andrea.train.lit.schedules.warmup_cosine
TYPO = "model.scheduler.warmup_step is not a setting of warmup_cosine (did you mean model.scheduler.warmup_steps?)"


def errors(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_function_target_validates_without_an_error_logged(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    cfg = compose_train(tmp_path, [SCHEDULED])
    validate(cfg)
    assert cfg.model.scheduler._target_ == "andrea.train.lit.schedules.warmup_cosine" and errors(caplog) == []


def test_a_key_added_to_a_function_target_is_refused_with_the_closest_one(tmp_path, caplog):
    cfg = compose_train(tmp_path, [SCHEDULED, "+model.scheduler.warmup_step=5"])
    with pytest.raises(ConfigError, match=re.escape(TYPO + "; drop the override, or check its spelling")):
        validate(cfg)
    assert errors(caplog) == []


def test_a_key_written_into_a_function_target_is_refused_with_the_closest_one(tmp_path, caplog):
    """As an experiment file or a user's own config would hold it, not added by an override."""
    cfg = compose_train(tmp_path, [SCHEDULED])
    with open_dict(cfg):
        cfg.model.scheduler.warmup_step = 5
    with pytest.raises(ConfigError, match=re.escape(TYPO + "; drop the override")):
        validate(cfg)
    assert errors(caplog) == []
