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

from importlib.metadata import entry_points

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

GROUP = "andrea.conf"


class AndreaPluginConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for entry_point in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
            search_path.append(provider=f"andrea-plugin:{entry_point.name}", path=f"pkg://{entry_point.value}")


def register() -> None:
    Plugins.instance().register(AndreaPluginConfigs)
