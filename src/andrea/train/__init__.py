"""The training application: config checks, the Hydra run and its run dir, the Lightning module and
callbacks (lit/), sweep summaries. Imports every layer below it; never cli.

Importing it registers what Hydra needs to compose andrea's configs: the `${andrea.*}` resolvers and
the config groups of installed plugins (entry-point group `andrea.conf`) and hydra/launcher=slurm's settings.
"""

import andrea.train.resolvers  # noqa: F401
from andrea.train import slurm_settings as _slurm_settings
from hydra_plugins import andrea_configs as _plugin_configs

_plugin_configs.register()
_slurm_settings.register()
