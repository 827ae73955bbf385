"""What the data and the network must agree on, checked from the config before either is built: the vocabulary,
the context, a full batch of rows, and rows that fit the machine's memory."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from andrea.data.catalog import TARGETS
from andrea.models import memory
from andrea.train.errors import ConfigError


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def ints(cfg: DictConfig, *keys: str) -> list[int | None]:
    """Each key's value where the config holds an integer there, else None."""
    values = [_get(cfg, key) for key in keys]
    return [value if isinstance(value, int) and not isinstance(value, bool) else None for value in values]


def check_data(cfg: DictConfig) -> None:
    """The network's vocabulary and context against the data's, and one full batch of rows to train on (a value
    the config does not hold, as a user's own data module may not, is left to that module)."""
    vocab, net_vocab = ints(cfg, "data.vocab_size", "model.net.vocab_size")
    if _below(net_vocab, vocab):
        assert vocab is not None  # _below compares two numbers
        raise ConfigError(
            f"model.net.vocab_size={net_vocab} is smaller than the data's vocabulary ({vocab}): token ids "
            f"up to {vocab - 1} would index past the embedding; drop the override"
        )
    seq_len, max_context = ints(cfg, "data.seq_len", "model.net.max_context")
    if _below(max_context, seq_len):
        raise ConfigError(f"data.seq_len={seq_len} exceeds model.net.max_context={max_context}; raise max_context")
    for name in _get(cfg, "data.eval_sets") or {}:
        (longer,) = ints(cfg, f"data.eval_sets.{name}.seq_len")
        if _below(max_context, longer):
            raise ConfigError(
                f"data.eval_sets.{name}.seq_len={longer} exceeds model.net.max_context={max_context}; raise "
                "model.net.max_context to the longest set (positions past the training length stay untrained)"
            )
    _check_readout(cfg)
    rows_key = "data.num_train" if _get(cfg, "data.num_train") is not None else "data.samples_per_epoch"
    rows, batch = ints(cfg, rows_key, "data.batch_size")
    if _below(rows, batch):
        raise ConfigError(
            f"{rows_key}={rows} is smaller than data.batch_size={batch}: not one full batch to train on; "
            "lower the batch size or make more rows"
        )


READOUTS = {"compression": "pooled_last"}  # the tasks that need a readout other than the next token's


def _check_readout(cfg: DictConfig) -> None:
    """Each of andrea's tasks with the readout it is scored through: MAD's compression with MAD's autoencoder (a
    next-token readout sees each token it is asked for), every other with the next token's (the pooled code has
    read every token a label asks for). A user's own data module is its own to check."""
    target = _get(cfg, "data._target_")
    readout = _get(cfg, "model.net.readout", "next_token")
    task = TARGETS.get(target) if isinstance(target, str) else None
    if task is None:
        return
    needed = READOUTS.get(task, "next_token")
    if readout == needed:
        return
    if needed == "next_token":
        raise ConfigError(
            f"model.net.readout={readout} decodes every position from the last one, which has read every token "
            f"data={task}'s labels ask for; only data=compression takes it: drop the override"
        )
    raise ConfigError(
        f"data={task} needs model.net.readout={needed} (MAD's autoencoder: every position decoded from "
        f"the last one), not {readout}: a next-token readout sees the token it is asked for; use "
        f"experiment={task} or add model.net.readout={needed}"
    )


def check_data_memory(datamodule: object) -> None:
    """The rows a task will make (its `footprint`) fit the machine's memory: refused by the setting that grows them
    before any is made (`data.p=100000`: 10¹⁰ pairs of modular addition)."""
    footprint = getattr(datamodule, "footprint", None)
    if footprint is None:  # text, or a user's own data module
        return
    need, setting = footprint()
    have = memory.available("cpu")  # rows are made on the CPU whatever trains
    if need > have:
        raise ConfigError(
            f"{setting}: the task's rows need about {memory.size_text(need)}, more than the "
            f"{memory.size_text(have)} of memory on cpu; lower {setting.split('=')[0]}"
        )


def _below(value: int | None, bound: int | None) -> bool:
    return value is not None and bound is not None and value < bound
