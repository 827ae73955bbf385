"""andrea: a plugin-style attention model zoo with a Hydra-configured Lightning pipeline."""

__version__ = "0.1.0"

# Wherever andrea's configs are composed (the commands, tests, a notebook's compose()): the config
# groups of installed plugins (entry-point group `andrea.conf`) join andrea's own, and the
# ${andrea.*} resolvers the configs use are registered.
import andrea.resolvers  # noqa: E402, F401
from hydra_plugins import andrea_configs as _plugin_configs  # noqa: E402

_plugin_configs.register()
