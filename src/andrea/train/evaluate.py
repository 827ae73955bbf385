"""A trained model on its task's validation and evaluation sets, at the settings it trained with or any others
(andrea-eval): the task is read from the checkpoint as plain values (its name, one of andrea.data.catalog's, and
its settings) and rebuilt from our own class with the changes applied and checked as the task checks its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from andrea.data.catalog import CHECKPOINT_TASK_KEY, TASKS, plain, task_class
from andrea.data.tasks import SyntheticTaskDataModule
from andrea.models.network import network
from andrea.train.checks_data import check_data_memory
from andrea.train.lit.module import next_token_loss
from andrea.train.lit.val_metrics import SCORES, SetMetrics


def saved_task(state: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """The task a checkpoint names, checked as plain values: (name, settings)."""
    record = state.get(CHECKPOINT_TASK_KEY)
    if record is None:
        raise ValueError(
            f"{where} names no synthetic task ({CHECKPOINT_TASK_KEY} is absent: a text run, or a checkpoint from "
            "before andrea-eval); evaluate a checkpoint of a synthetic task's run"
        )
    name, settings = (record.get("name"), record.get("settings")) if isinstance(record, dict) else (None, None)
    if name not in TASKS or not isinstance(settings, dict) or not all(plain(v) for v in settings.values()):
        raise ValueError(
            f"{where}: {CHECKPOINT_TASK_KEY} is not a task andrea knows with plain settings; it is corrupt"
        )
    return str(name), {str(key): value for key, value in settings.items()}


def build_task(name: str, settings: dict[str, Any], changes: Mapping[str, Any]) -> SyntheticTaskDataModule:
    """The task with `changes` (data.<key> settings without the prefix) applied; an unknown key refused by name."""
    unknown = sorted(set(changes) - set(settings))
    if unknown:
        raise ValueError(
            f"data.{unknown[0]} is not a setting of task {name}; its settings are "
            + ", ".join(f"data.{key}" for key in sorted(settings))
        )
    task = task_class(name)(**(settings | dict(changes)))
    check_data_memory(task)
    return task


def check_fits(net: nn.Module, task: SyntheticTaskDataModule) -> None:
    """Every set's rows fit the model's context and vocabulary, before any is evaluated."""
    context, vocab = network(net).max_context, network(net).vocab_size
    sets = {"data.seq_len": task.seq_len} | {
        f"data.eval_sets.{name}.seq_len": changes.get("seq_len", task.seq_len)
        for name, changes in task.eval_sets.items()
    }
    for key, length in sets.items():
        if context is not None and length > context:
            raise ValueError(
                f"{key}={length} is longer than the model's context ({context} tokens); evaluate at most {context}"
            )
    if task.vocab_size > vocab:
        raise ValueError(f"data.vocab_size={task.vocab_size} is larger than the model's vocabulary ({vocab})")


@torch.no_grad()
def evaluate(net: nn.Module, task: SyntheticTaskDataModule) -> dict[str, dict[str, float]]:
    """Each set's rows, loss, token accuracy, macro accuracy and perplexity: {set name: {score: value}}."""
    task.setup()
    loaders = task.val_dataloader()
    loaders = loaders if isinstance(loaders, list) else [loaders]
    device = next(net.parameters()).device
    found = {}
    for name, loader in zip(task.val_set_names, loaders, strict=True):
        metrics = SetMetrics(network(net).vocab_size).to(device)
        for batch in loader:
            ids, labels = batch["input_ids"].to(device), batch["labels"].to(device)
            logits = net(ids)[0]
            metrics.update(next_token_loss(logits, labels), logits, labels)
        scores = {metric: float(getattr(metrics, metric).compute()) for metric in SCORES}
        found[name] = {"rows": float(len(loader.dataset)), **scores}  # type: ignore[arg-type]  # TokenRows has a len
    return found
