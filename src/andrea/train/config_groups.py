"""The config groups `andrea-train --help` lists, `group: option, option, ...`, read from the folders Hydra's search
path gives andrea-train: andrea's configs (the `andrea.conf` package) and each installed plugin's config package
(entry-point group `andrea.conf`, hydra_plugins.andrea_configs). Hydra's own listing ($APP_CONFIG_GROUPS) builds a
config repository for every group it visits, about 1.2 s of a 2 s `--help`; this reads the same folders once.
Hydra's groups (hydra/...) are left out, as Hydra leaves them out of that listing."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from hydra_plugins.andrea_configs import found_config_packages

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc from Python 3.11 on


def config_groups() -> dict[str, list[str]]:
    """{group ("a" or "a/b"): its options, sorted}, sorted by group, over andrea's configs and the plugins'."""
    found: dict[str, set[str]] = {}
    for root in _roots():
        for folder in (entry for entry in root.iterdir() if entry.is_dir() and entry.name != "hydra"):
            _options(folder, folder.name, found)
    return {group: sorted(options) for group, options in sorted(found.items()) if options}


def help_lines() -> str:
    return "\n".join(f"{group}: {', '.join(options)}" for group, options in config_groups().items())


def _roots() -> list[Traversable]:
    """andrea's configs, then each plugin's config package that can be found, as the search path orders them."""
    return [files("andrea.conf"), *(files(entry_point.value) for entry_point, _ in found_config_packages())]


def _options(folder: Traversable, group: str, found: dict[str, set[str]]) -> None:
    """The YAML files of `folder` as options of `group`, and its subfolders as groups of their own."""
    if group.rsplit("/", 1)[-1].startswith(("_", ".")):  # __pycache__, hidden folders: no group
        return
    options = found.setdefault(group, set())
    for entry in folder.iterdir():
        if entry.is_dir():
            _options(entry, f"{group}/{entry.name}", found)
        elif entry.name.endswith(".yaml"):
            options.add(entry.name.removesuffix(".yaml"))
