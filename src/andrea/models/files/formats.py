"""Which math a model file holds: the format it was written in, and how an older one is read as it was trained.

Every file andrea writes records FORMAT (a checkpoint under `andrea_format`, an export in its metadata under
`andrea.format`); a file that records none was written before formats were recorded: format 1. Each change to
the math of a saved setting since then raises FORMAT, and `upgrade` reads an older file with the setting that
gives the math it was trained with, written into its config, or refuses it in one line naming the setting
where no setting gives that math. An older file is never loaded silently into the new math.

    2   mechanism=gated's gate follows model.net.bias (format 1: a bias always): read with mechanism.gate_bias=true
        heads=mla's latent RMSNorms take heads.latent.norm_eps, 1e-6 (format 1: torch's default eps): read with
        norm_eps=null
        mechanism=diff with position=rope rotates each half on its own (format 1: the whole head, mixing the
        halves): refused, no setting gives that math
"""

from __future__ import annotations

import copy
from typing import Any

from andrea.models.files.schema import ModelFileError
from andrea.utils.rules import integer

FORMAT = 2
CHECKPOINT_FORMAT_KEY = "andrea_format"  # where a .ckpt records it
METADATA_FORMAT_KEY = "andrea.format"  # where an export's metadata records it (a string, as metadata is)


def file_format(value: object, where: str, key: str) -> int:
    """The format a file records under `key` (absent: 1), refused in one line if it is not one andrea reads."""
    if value is None:
        return 1
    number: object = int(value) if isinstance(value, str) and value.isdigit() else value
    test, words = integer(1, FORMAT)
    if not test(number):
        newer = isinstance(number, int) and not isinstance(number, bool) and number > FORMAT
        fix = "upgrade andrea to read it" if newer else "give a file written by andrea"
        raise ModelFileError(f"{where}: {key}={value!r} must be {words} (this andrea writes {FORMAT}); {fix}")
    assert isinstance(number, int)
    return number


def upgrade(config: Any, version: int, where: str, prefix: str) -> Any:
    """A file's network config of format `version`, with the settings that give its math today; the file's own
    config is left as it was. A config that is not a mapping goes on as it is, for the schema to refuse."""
    if version >= FORMAT or not isinstance(config, dict) or not isinstance(config.get("attention"), dict):
        return config
    config = copy.deepcopy(config)
    attention = config["attention"]
    _upgrade_mechanism(attention, config.get("position"), version, where, prefix)
    latent = attention.get("latent")
    if isinstance(latent, dict) and "norm_eps" not in latent:  # format 1: torch's default eps
        attention["latent"] = {**latent, "norm_eps": None}
    return config


def _upgrade_mechanism(attention: dict, position: Any, version: int, where: str, prefix: str) -> None:
    """The mechanism of an older file with the settings that give its math today, or refused where none does."""
    mechanism = attention.get("mechanism")
    name = mechanism.get("name") if isinstance(mechanism, dict) else mechanism
    if name == "diff" and position == "rope":
        raise ModelFileError(
            f"{where}: {prefix}.attention.mechanism=diff with {prefix}.position=rope was saved in format {version}, "
            "whose RoPE turned each head whole, mixing its two halves; no setting gives that math, so it is "
            "refused unread: train it again (position=rope now rotates each half on its own)"
        )
    if name == "gated":  # format 1's gate had a bias whatever model.net.bias said
        settings = mechanism if isinstance(mechanism, dict) else {"name": "gated"}
        attention["mechanism"] = {"gate_bias": True, **settings}
