"""The validation data of a finished run, read from its result.json (the resolved config) and mapped
onto andrea's own data modules: the file's `_target_` names one of andrea.data.catalog's, with plain field
values the module's constructor takes; nothing else is imported or called on its word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L

from andrea.data.catalog import TARGETS, data_class, plain
from andrea.utils.run_result import RESULT_FILE, RunResult
from andrea.utils.typed_settings import setting_names


def data_from_run(run_dir: str | Path) -> L.LightningDataModule:
    """The data module a run trained on, from `<run_dir>/result.json`; ValueError in one line if unusable."""
    path = Path(run_dir) / RESULT_FILE
    if not path.is_file():
        raise ValueError(f"{path} not found: the run did not complete; give the run dir of a finished andrea-train")
    try:
        config = (RunResult.read(path).config or {})["data"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path} holds no data config (config.data); it is not an andrea-train result") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: config.data is not a mapping")
    target = config.get("_target_")
    if not isinstance(target, str) or target not in TARGETS:
        raise ValueError(f"{path}: config.data._target_={target!r} is not one of andrea's data modules")
    cls = data_class(TARGETS[target])
    return cls(**_fields(config, cls, path))


def _fields(config: dict[str, Any], cls: type, path: Path) -> dict[str, Any]:
    """The recorded settings as the constructor's keywords: each one it takes, holding plain values only."""
    accepted = setting_names(cls)
    fields: dict[str, Any] = {}
    for key, value in config.items():
        if key == "_target_":
            continue
        if key not in accepted:
            raise ValueError(f"{path}: config.data.{key} is not a setting of {cls.__name__}")
        if not plain(value):
            raise ValueError(
                f"{path}: config.data.{key} holds more than plain values (strings, numbers, booleans, null, and "
                "mappings of them); it is not an andrea-train result"
            )
        fields[key] = value
    return fields
