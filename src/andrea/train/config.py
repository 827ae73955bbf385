"""One validation step for a composed training config: a dry build.

Compose, check, build, fit: `validate(cfg)` runs every check once, in andrea.train.checks, before anything is
built (what the data and the network must agree on included: the checks build the attention backend and mask
every layer shares, and check them against the data's length and the training device), then builds the run's
parts once each: the data module, then the LightningModule, whose network takes the checked backend and mask.
Every refusal is a ConfigError of one line that names the key and the fix, raised before any file is written;
andrea.train.pipeline trains the very parts `validate` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning as L
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from andrea.models.memory import Estimate
from andrea.train.checks import check_config
from andrea.train.checks_data import check_data_memory
from andrea.train.errors import ConfigError

__all__ = ["ConfigError", "Parts", "validate"]


@dataclass
class Parts:
    """What a run trains: its data module and its LightningModule (the network inside), built once."""

    datamodule: Any  # a LightningDataModule of andrea.data, or a user's `_target_`
    module: Any  # andrea.train.lit.LanguageModelModule, or a user's `_target_`
    memory: Estimate | None = None  # the training memory estimated before anything was built
    finished: str | None = None  # ckpt_path already holds the whole run: what to say instead of training


def validate(cfg: DictConfig, here: bool = True) -> Parts:
    """Refuse an impossible config with a one-line ConfigError naming the key; else the run's parts: checked
    once (andrea.train.checks), then built once, the network from the attention parts the checks built.
    `here=False`: a run planned for another machine (andrea.train.checks.check_config)."""
    try:
        checked = check_config(cfg, here)
        L.seed_everything(cfg.seed, workers=True, verbose=False)  # the network's first weights follow the seed
        datamodule = instantiate(cfg.data)  # checks data.* itself; builds no tensors yet
        check_data_memory(datamodule)
        if checked.attention is None:
            module = instantiate(cfg.model)  # a user's network, or none with attention: it checks itself
        else:  # andrea's network, on the backend and mask the checks built and checked
            built = checked.attention  # the attention parts the checks built, in their kinds' places
            net = instantiate(cfg.model.net, _partial_=True)
            module = instantiate(cfg.model, net=net(attention=built.attention, kinds=built.kinds or None))
    except ConfigError:
        raise
    except InstantiationException as err:  # Hydra wraps what the constructor raised
        raise ConfigError(_constructor_message(err)) from None
    except InterpolationResolutionError as err:  # a resolver refused, e.g. a missing data package
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(str(cause).splitlines()[0]) from None
    except ValueError as err:  # the zoo's own one-line messages already name the key
        raise ConfigError(str(err).splitlines()[0]) from None
    module.net_config = OmegaConf.to_container(cfg.model.net, resolve=True)  # for checkpoints and export
    module.tokenizer = cfg.data.get("tokenizer")  # text data only; andrea-sample reads it back
    return Parts(datamodule, module, checked.memory, checked.finished)


def _constructor_message(err: InstantiationException) -> str:
    """The one line to show for a constructor that refused its config (its keys were checked against its
    signature before, andrea.train.keys.check_targets: what is left is the constructor's own refusal)."""
    cause = err.__cause__
    if isinstance(cause, OSError) and cause.args and isinstance(cause.args[0], str):
        return cause.args[0].splitlines()[0]
    if isinstance(cause, ValueError):  # the zoo's own messages name the key already
        return str(cause).splitlines()[0]
    return " ".join(str(err).split())
