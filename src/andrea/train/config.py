"""One validation step for a composed training config: a dry build.

`validate(cfg)` checks what the config alone says (andrea.train.checks), then builds the run's parts,
each once: the data module, then the LightningModule, whose network builds the attention backend and
mask once for all its layers. What the parts must agree on is checked on the built objects. Every
refusal is a ConfigError of one line that names the key and the fix, raised before any file is
written; andrea.train.pipeline trains the very parts `validate` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning as L
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from andrea.attention import UnsupportedAttentionError
from andrea.models.memory import Estimate
from andrea.train.checks import check_accelerator, check_config, on_cpu
from andrea.train.errors import ConfigError

__all__ = ["ConfigError", "Parts", "validate"]


@dataclass
class Parts:
    """What a run trains: its data module and its LightningModule (the network inside), built once."""

    datamodule: Any  # a LightningDataModule of andrea.data, or a user's `_target_`
    module: Any  # andrea.train.lit.LanguageModelModule, or a user's `_target_`
    memory: Estimate | None = None  # the training memory estimated before anything was built


def validate(cfg: DictConfig) -> Parts:
    """Refuse an impossible config with a one-line ConfigError naming the key; else the run's parts."""
    try:
        memory = check_config(cfg)
        L.seed_everything(cfg.seed, workers=True, verbose=False)  # the network's first weights follow the seed
        datamodule = instantiate(cfg.data)  # checks data.* itself; builds no tensors yet
        _check_data(cfg, datamodule)
        module = instantiate(cfg.model)  # the network, its backend and mask check their own settings
        _check_attention(cfg, module.net, datamodule.seq_len)
        check_accelerator(cfg)
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
    return Parts(datamodule, module, memory)


def _check_data(cfg: DictConfig, data: Any) -> None:
    """What the data module and the network's config must agree on, before the network is built."""
    net_vocab = OmegaConf.select(cfg, "model.net.vocab_size")
    if isinstance(net_vocab, int) and net_vocab < data.vocab_size:
        raise ConfigError(
            f"model.net.vocab_size={net_vocab} is smaller than the data's vocabulary ({data.vocab_size}): token ids "
            f"up to {data.vocab_size - 1} would index past the embedding; drop the override"
        )
    max_context = OmegaConf.select(cfg, "model.net.max_context", default=data.seq_len)
    if max_context < data.seq_len:
        raise ConfigError(f"data.seq_len={data.seq_len} exceeds model.net.max_context={max_context}; raise max_context")
    if data.num_train < data.batch_size:
        raise ConfigError(
            f"data.num_train={data.num_train} is smaller than data.batch_size={data.batch_size}: "
            "not one full batch to train on; lower the batch size or make more rows"
        )


def _check_attention(cfg: DictConfig, net: Any, seq_len: int) -> None:
    """The built network's mask against the data's context, and its backend on the device training will run on
    (what holds on every device the blocks checked as they were built)."""
    blocks = getattr(net, "attention", None) or []
    if not blocks:  # the no-attention ablation, or a user's network of another shape
        return
    block = blocks[0]  # every layer shares one backend and one mask
    if isinstance(seq_len, int):
        block.mask.check_context(seq_len)
    device = "cpu" if on_cpu(cfg) else "cuda"
    try:
        block.backend.check(
            mask=block.mask, device=device, needs_grad=True, score_mod=block.score_mod, head_dim=block.head_dim
        )
    except UnsupportedAttentionError as err:
        hint = " (trainer=gpu)" if device == "cpu" else ""
        raise ConfigError(f"attention={block.backend.name}: {err}{hint}") from None


def _constructor_message(err: InstantiationException) -> str:
    """The one line to show for a constructor that refused its config (its keys were checked against its
    signature before, andrea.train.keys.check_targets: what is left is the constructor's own refusal)."""
    cause = err.__cause__
    if isinstance(cause, OSError) and cause.args and isinstance(cause.args[0], str):
        return cause.args[0].splitlines()[0]
    if isinstance(cause, ValueError):  # the zoo's own messages name the key already
        return str(cause).splitlines()[0]
    return " ".join(str(err).split())
