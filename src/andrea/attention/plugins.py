"""The plugin machinery behind andrea's registries (andrea.attention.registry): a name -> class map of
built-ins, plus what installed packages declare under an entry-point group, loaded lazily; a plugin that
cannot be loaded is one line naming its entry point."""

from __future__ import annotations

import importlib
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
            found = {ep.name: ep for ep in entry_points(group=self.group)}
            clashes = sorted(set(found) & set(self.builtins))
            if clashes:
                raise ValueError(
                    f"{self.what} plugin(s) {', '.join(clashes)} reuse a built-in name; "
                    f"rename them in the '{self.group}' entry points"
                )
            self._plugins = found
        return self._plugins

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


class PluginError(ValueError):
    """A plugin's entry point cannot be loaded."""


CONF_GROUP = "andrea.conf"  # entry points naming a package of config groups (hydra_plugins.andrea_configs)


def plugin_failure(entry_point: EntryPoint, err: BaseException) -> str:
    """One line naming a plugin entry point that cannot be loaded, and why."""
    detail = " ".join(str(err).split()) or type(err).__name__
    return (
        f"plugin entry point '{entry_point.name} = {entry_point.value}' (group '{entry_point.group}') "
        f"cannot be loaded: {type(err).__name__}: {detail}"
    )
