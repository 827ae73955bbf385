"""Keys and values of a composed training config, checked before anything is built.

added keys   `+key=value` appends any key, typos included (Hydra does not check). A key
             that the class of its node does not take (or, for a node without a
             `_target_`, that the node did not have) is refused with the closest valid one.
typed nodes  every node under `model` and `data` with a `_target_` holds only what its class's
             signature takes (a key written into a config file, not only one added), so no
             constructor is called with a keyword it does not know.
numbers      every number the docs document has a type and a range (RANGES); a value
             outside it (`nan`, `abc`, an empty string, `1e9` epochs) is refused.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf

from andrea.data.settings import DATA
from andrea.models.settings import NET
from andrea.train import maps_settings
from andrea.utils.rules import (
    POSITIVE,
    Rule,
    duration,
    either,
    first_problem,
    integer,
    number,
    optional,
    pair,
    prefixed,
)

HYDRA_KEYWORDS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")

BATCHES = optional(
    either("a number of batches (an integer >= 0) or a fraction of the epoch in [0, 1]", integer(0), number(0.0, 1.0))
)
RANGES: dict[str, Rule] = {  # data first: the presets interpolate model.net from it
    "seed": integer(0, 2**32 - 1),  # numpy's seed range (Lightning seeds numpy too)
    **prefixed("data.", DATA),
    "model.optimizer.lr": number(0.0, low_open=True),
    "model.optimizer.weight_decay": number(0.0),
    "model.optimizer.eps": number(0.0, low_open=True),
    "model.optimizer.betas": pair(number(0.0, 1.0, high_open=True)),  # AdamW's: each in [0, 1)
    **prefixed("model.net.", NET, leave=("position",)),  # position.kind: checked against the model's kinds
    "trainer.max_epochs": optional(integer(1, also=(-1,))),
    "trainer.min_epochs": optional(integer(0)),
    "trainer.max_steps": integer(1, also=(-1,)),
    "trainer.min_steps": optional(integer(0)),
    "trainer.max_time": duration(),
    "trainer.limit_train_batches": BATCHES,
    "trainer.limit_val_batches": BATCHES,
    "trainer.val_check_interval": optional(
        either(
            "a number of batches (an integer >= 1) or a fraction of the epoch in (0, 1]",
            POSITIVE,
            number(0.0, 1.0, low_open=True),
        )
    ),
    "trainer.check_val_every_n_epoch": optional(POSITIVE),
    "trainer.accumulate_grad_batches": POSITIVE,
    "trainer.log_every_n_steps": POSITIVE,
    "trainer.num_sanity_val_steps": integer(0, also=(-1,)),
    "trainer.gradient_clip_val": optional(number(0.0)),
    "trainer.num_nodes": POSITIVE,
    "callbacks.last_checkpoint.every_n_train_steps": POSITIVE,
    **prefixed(maps_settings.PREFIX, maps_settings.SETTINGS),
    "callbacks.run_stats.peak_tflops": optional(number(0.0, low_open=True)),
    "report.best_over": (
        lambda v: isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(x, str) and x for x in v),
        "a list of sweep keys, e.g. [model.optimizer.lr]",
    ),
}


def check_ranges(cfg: DictConfig) -> str | None:
    """The first documented number out of its type or range, as a one-line message (None: all fine)."""
    missing = object()
    values = {key: OmegaConf.select(cfg, key, default=missing) for key in RANGES}
    return first_problem(RANGES, {key: value for key, value in values.items() if value is not missing})


def check_added_keys(cfg: DictConfig, overrides: list[str]) -> str | None:
    """The first `+key=value` (or `++key=value`) override whose key nothing takes, with the closest valid key.

    A new object (`+callbacks.stop={_target_: ...}`) is always welcome: it says itself what takes it.
    `++` may also set a key that exists, so it is checked only against a class's signature."""
    for override in OverridesParser.create().parse_overrides(overrides):
        problem = _unknown_key(cfg, override) if _adds_a_key(override) else None
        if problem:
            return problem
    return None


def check_targets(cfg: DictConfig, roots: tuple[str, ...] = ("data", "model")) -> str | None:
    """The first key of a `_target_` node under `roots` that its class does not take, with the closest one."""
    for root in roots:
        node = OmegaConf.select(cfg, root)
        problem = _foreign_key(node, root) if isinstance(node, DictConfig) else None
        if problem:
            return problem
    return None


def _foreign_key(node: DictConfig, key: str) -> str | None:
    """The first key of `node` or a node under it that its `_target_`'s signature does not take."""
    problem = _unaccepted(node, key)
    children = [node._get_node(leaf) for leaf in map(str, node)]
    for child in children:
        if problem is None and isinstance(child, DictConfig) and _is_set(child):
            problem = _foreign_key(child, str(child._get_full_key(None)))
    return problem


def _unaccepted(node: DictConfig, key: str) -> str | None:
    """The first key of `node` that the signature of its `_target_` does not take (None: none, or no target)."""
    target = None if OmegaConf.is_missing(node, "_target_") else node.get("_target_")
    accepted, owner = _signature_keys(target) if isinstance(target, str) else (None, key)
    extra = [leaf for leaf in map(str, node) if accepted is not None and leaf not in (*accepted, *HYDRA_KEYWORDS)]
    if not extra or accepted is None:
        return None
    match = difflib.get_close_matches(extra[0], accepted, n=1, cutoff=0.6)
    hint = f" (did you mean {key}.{match[0]}?)" if match else ""
    return f"{key}.{extra[0]} is not a setting of {owner}{hint}; drop the override"


def _is_set(node: DictConfig) -> bool:
    return not node._is_missing() and not node._is_none()


def _adds_a_key(override: Any) -> bool:
    """A `+key=value` or `++key=value` that adds a plain setting (not a group's option, not a new object)."""
    adds = override.is_add() or override.is_force_add()
    key = override.key_or_group
    return adds and override.package is None and not _is_group(key) and not _is_object(override.value())


def _unknown_key(cfg: DictConfig, override: Any) -> str | None:
    """Why the key `override` adds is taken by nothing (with the closest valid key), or None."""
    key = override.key_or_group
    parent_key, _, leaf = key.rpartition(".")
    if leaf in HYDRA_KEYWORDS or parent_key == "attention.options":  # options: the backend's own check
        return None
    parent = OmegaConf.select(cfg, parent_key) if parent_key else cfg
    if not isinstance(parent, DictConfig) or override.is_force_add() and "_target_" not in parent:
        return None
    accepted, owner = _accepted(parent, leaf, parent_key)
    if accepted is None or leaf in accepted:
        return None
    match = difflib.get_close_matches(leaf, accepted, n=1, cutoff=0.6)
    hint = f" (did you mean {'.'.join(filter(None, (parent_key, match[0])))}?)" if match else ""
    return f"{key} is not a setting of {owner}{hint}; drop the override, or check its spelling"


def _accepted(node: DictConfig, added: str, node_key: str) -> tuple[list[str] | None, str]:
    """The keys `node` may hold (None: any, a class taking **kwargs) and who takes them."""
    target = node.get("_target_")
    if node_key.rpartition(".")[2] == "mechanism" and isinstance(node.get("name"), str):
        return _mechanism_settings(node.name)
    if target is None:
        return [str(k) for k in node if k != added and not str(k).startswith("_")], node_key or "the config"
    return _signature_keys(target)


def _signature_keys(target: str) -> tuple[list[str] | None, str]:
    """The arguments the class or function `target` takes (None: any, through **kwargs) and its name."""
    try:
        callee = get_method(target)  # a class or a function (a scheduler): get_class logs an error on a function
        signature = inspect.signature(callee)
    except Exception:  # a target that does not import is the constructor check's to report
        return None, target
    params = signature.parameters.values()
    name = getattr(callee, "__name__", target)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None, name
    return [p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL], name


def _mechanism_settings(name: str) -> tuple[list[str] | None, str]:
    """A mechanism config (`mechanism: {name: softcap, cap: 50}`) takes its name and the mechanism's settings."""
    from andrea.attention.registry import mechanism_settings

    try:
        settings = mechanism_settings(name)
    except Exception:  # an unknown mechanism is the block's to report, by name
        return None, name
    return ["name", *settings], f"mechanism {name} (it takes {', '.join(settings) or 'no settings'})"


def _is_object(value: Any) -> bool:
    return isinstance(value, Mapping) and "_target_" in value


def _is_group(key: str) -> bool:
    """Whether `key` names a config group (`+experiment=...` appends a choice, not a key)."""
    from hydra.core.global_hydra import GlobalHydra

    if "/" in key:
        return True
    if GlobalHydra.instance().is_initialized():
        return bool(GlobalHydra.instance().config_loader().get_group_options(key))
    return (files("andrea.conf") / key.replace(".", "/")).is_dir()
