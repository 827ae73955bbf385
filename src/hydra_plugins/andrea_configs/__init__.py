"""Config groups from andrea plugins: every package that declares one under the entry-point group
`andrea.conf` gets its folder on Hydra's search path, so its options join andrea's own groups
(`attention=einsum`, `mask=strided`) and `andrea-train --help` lists them.

    [project.entry-points."andrea.conf"]
    my_plugin = "my_plugin.conf"       # a package (with __init__.py) holding attention/*.yaml, mask/*.yaml, ...

The entry point names a package to read YAML from; nothing in it is imported. Hydra takes
search-path plugins only from the `hydra_plugins` namespace, hence this module's place;
andrea.train.resolvers.register() registers it, since an editable install's namespace is not scanned.
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import ModuleSpec
from importlib.metadata import EntryPoint, entry_points

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

GROUP = "andrea.conf"


def config_packages() -> list[EntryPoint]:
    """The installed plugins' config packages (entry-point group `andrea.conf`), by entry-point name."""
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def found_config_packages() -> list[tuple[EntryPoint, ModuleSpec]]:
    """Those whose package can be found, each with its spec (found, not imported); one that cannot is named by
    andrea's plugin warnings (andrea.attention.registry.broken_plugins)."""
    found = []
    for entry_point in config_packages():
        try:
            spec = importlib.util.find_spec(entry_point.value)
        except Exception:  # a parent package missing, a name no module can have
            continue
        if spec is not None:
            found.append((entry_point, spec))
    return found


class AndreaPluginConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for entry_point in config_packages():
            search_path.append(provider=f"andrea-plugin:{entry_point.name}", path=f"pkg://{entry_point.value}")


def register() -> None:
    Plugins.instance().register(AndreaPluginConfigs)
