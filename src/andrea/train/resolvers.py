"""What composing andrea's configs needs, registered by `register()` before any config is composed (andrea.conf
calls it as Hydra imports it, whoever composes: andrea-train, a test, a notebook's compose()): the
`${andrea.*:...}` resolvers the configs in conf/ use, the config groups of installed plugins (entry-point group
`andrea.conf`) and hydra/launcher=slurm's settings. Calling it again changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from andrea.data.groups import group_order
from andrea.data.longest_row import longest_row
from andrea.data.packages import package_data, tokenizer_vocab
from andrea.train import config_groups, slurm_settings
from andrea.train.class_defaults import class_default
from andrea.train.experiments import help_lines
from andrea.train.hydra_run import config_subdir, run_id, run_name, sweep_group
from andrea.train.slurm import gpus_per_node
from hydra_plugins import andrea_configs

RESOLVERS: dict[str, Callable[..., Any]] = {
    "andrea.sweep_group": sweep_group,
    "andrea.run_name": run_name,
    "andrea.tensorboard_run": lambda: (run_name() or "run").replace("/", "_"),  # a folder's name: no "/"
    "andrea.run_id": run_id,
    "andrea.config_subdir": config_subdir,
    "andrea.slurm_gpus_per_node": gpus_per_node,
    "andrea.tokenizer_vocab": tokenizer_vocab,
    "andrea.package_data": package_data,
    "andrea.add": lambda a, b: a + b,  # modular addition's vocabulary: ${andrea.add:${.p},1}
    "andrea.max": max,  # modular counting's vocabulary: ${andrea.max:2,${.modulus}}
    "andrea.group_order": group_order,  # the word problem's vocabulary: ${andrea.group_order:${.group}}
    "andrea.longest_row": longest_row,  # the models' context: data.seq_len, or an eval set's longer one
    "andrea.experiments_help": help_lines,  # andrea-train --help's experiments, each with its summary
    "andrea.config_groups_help": config_groups.help_lines,  # its config groups, read once (andrea.train.config_groups)
    "andrea.class_default": class_default,  # a mixer setting's default, from its class (andrea.train.class_defaults)
}


def register() -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    andrea_configs.register()
    slurm_settings.register()
