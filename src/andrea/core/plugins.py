"""The plugin machinery behind andrea's registries (attention's in andrea.attention.registry, the token mixers' in
andrea.mixers.layers): a name -> class map of built-ins, plus what installed packages declare under an
entry-point group, loaded lazily; a plugin that cannot be loaded is one line naming its entry point. Two plugins
with one name, or a plugin with a built-in's name, are one warning naming both packages: the first one found (a
built-in first of all) is kept, the other skipped, and everything else goes on."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> class, loaded lazily; unknown names are refused with the list of known ones."""

    def __init__(self, what: str, group: str, builtins: dict[str, str]) -> None:
        self.what = what  # "attention backend"
        self.group = group  # the entry-point group plugins declare under
        self.builtins = builtins  # name -> "module:Class"
        self._plugins: dict[str, Any] | None = None

    def _discover(self) -> dict[str, Any]:
        if self._plugins is None:
            found: dict[str, EntryPoint] = {}
            for entry_point in entry_points(group=self.group):
                kept = "andrea (a built-in)" if entry_point.name in self.builtins else found.get(entry_point.name)
                if kept is None:
                    found[entry_point.name] = entry_point
                    continue
                owner = kept if isinstance(kept, str) else f"package {package_of(kept)}"
                warnings.warn(
                    f"{self.what} '{entry_point.name}' is declared by {owner} and by package "
                    f"{package_of(entry_point)}; {owner}'s is kept, the other skipped: rename one in its "
                    f"'{self.group}' entry points",
                    PluginClash,
                    stacklevel=2,
                )
            self._plugins = found
        return self._plugins

    def entry_point(self, name: str) -> EntryPoint:
        """The entry point that declares the plugin `name`."""
        return self._discover()[name]

    def refresh(self) -> None:
        """Forget discovered plugins (after installing one into a running process)."""
        self._plugins = None

    def names(self) -> list[str]:
        return sorted({*self.builtins, *self._discover()})

    def load(self, name: str) -> type[T]:
        if name in self.builtins:
            module, _, attr = self.builtins[name].partition(":")
            return getattr(importlib.import_module(module), attr)
        plugins = self._discover()
        if name not in plugins:
            raise ValueError(
                f"unknown {self.what} '{name}'; available: {', '.join(self.names())} "
                f"(plugins register under the entry-point group '{self.group}')"
            )
        try:
            return plugins[name].load()
        except Exception as err:  # a plugin's import error is the plugin's: named in one line
            raise PluginError(plugin_failure(plugins[name], err)) from err

    def broken(self, check: Callable[[str], object] | None = None) -> list[str]:
        """One line per installed plugin of this registry that cannot be loaded, or that `check(name)` refuses
        with a PluginError (a mechanism that cannot be built)."""
        lines = []
        for name in sorted(set(self.names()) - set(self.builtins)):
            try:
                self.load(name)  # a plugin that cannot load is a PluginError naming its entry point
                if check is not None:
                    check(name)
            except PluginError as err:
                lines.append(str(err))
        return lines


class PluginError(ValueError):
    """A plugin's entry point cannot be loaded."""


class PluginClash(UserWarning):
    """Two plugins, or a plugin and a built-in, declare one name: the later is skipped."""


def package_of(entry_point: EntryPoint) -> str:
    """The installed package that declares an entry point (its module's top package where it is not known)."""
    dist = getattr(entry_point, "dist", None)
    return dist.name if dist is not None else entry_point.value.split(":")[0].split(".")[0]


CONF_GROUP = "andrea.conf"  # entry points naming a package of config groups (hydra_plugins.andrea_configs)


def plugin_failure(entry_point: EntryPoint, err: BaseException, what: str = "loaded") -> str:
    """One line naming a plugin entry point that cannot be loaded (or built), and why."""
    detail = " ".join(str(err).split()) or type(err).__name__
    return (
        f"plugin entry point '{entry_point.name} = {entry_point.value}' (group '{entry_point.group}') "
        f"cannot be {what}: {type(err).__name__}: {detail}"
    )
