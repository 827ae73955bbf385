"""The `${andrea.*:...}` resolvers the configs in conf/ use, registered once on import (andrea's
package __init__ imports it, so they exist before any config is composed)."""

from __future__ import annotations

from omegaconf import OmegaConf

from andrea.data.packages import package_data, tokenizer_vocab
from andrea.train.hydra_run import config_subdir, run_id, run_name, sweep_group
from andrea.train.slurm import gpus_per_node

for _name, _fn in (
    ("andrea.sweep_group", sweep_group),
    ("andrea.run_name", run_name),
    ("andrea.run_id", run_id),
    ("andrea.config_subdir", config_subdir),
    ("andrea.slurm_gpus_per_node", gpus_per_node),
    ("andrea.tokenizer_vocab", tokenizer_vocab),
    ("andrea.package_data", package_data),
):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)
