"""The reports andrea-inspect writes besides the page: the head-importance table, what an ablation costs, and the
patching heatmaps (each on the data andrea.cli.inspect_run reads)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import Tensor

from andrea.cli.app import SettingError
from andrea.cli.inspect_run import validation_batches
from andrea.cli.prompt import encode_prompt, token_labels
from andrea.models.network import Network


def importance(net: object, run_dir: Path | None, cfg: DictConfig, tokenizer: object = None) -> str:
    """The head-importance table on the run's validation data, written beside the checkpoint."""
    from andrea.lens.interventions import head_importance, importance_table, layer_importance
    from andrea.models.network import network
    from andrea.train.lit.module import next_token_loss

    model = network(net)  # type: ignore[arg-type]  # an nn.Module
    batches = validation_batches(run_dir, cfg, "importance=true", tokenizer, model.max_context)
    rows = head_importance(model, batches, next_token_loss)
    layers = layer_importance(model, batches, next_token_loss)
    table = importance_table(rows, layers)
    stem = Path(cfg.ckpt_path).with_suffix("")
    Path(f"{stem}.head_importance.md").write_text(table)
    Path(f"{stem}.head_importance.json").write_text(json.dumps({"heads": rows, "layers": layers}, indent=2))
    return table + f"written to {stem}.head_importance.md (and .json)"


def ablation_effect(
    net: object, heads: list[tuple[int, int]], ids: Tensor, run_dir: Path | None, cfg: DictConfig, tokenizer: object
) -> str:
    """One line: the loss with `heads` ablated together beside the intact network's, on importance_data's text,
    the run's validation batches, or (neither) the input's own next tokens."""
    from andrea.lens.interventions import ablation_loss, head_means
    from andrea.models.network import network
    from andrea.train.lit.module import next_token_loss

    model = network(net)  # type: ignore[arg-type]  # an nn.Module
    if cfg.get("importance_data") or run_dir is not None:
        batches = validation_batches(run_dir, cfg, "ablate", tokenizer, model.max_context)
        where = f"{len(batches)} batches of {cfg.importance_data}" if cfg.get("importance_data") else ""
        where = where or f"{len(batches)} validation batches"
    else:
        batches, where = [(ids[:, :-1], ids[:, 1:])], f"the input's {ids.shape[1] - 1} next tokens"
    means = head_means(model, [idx for idx, _ in batches]) if cfg.ablation == "mean" else None
    found = ablation_loss(model, batches, heads, next_token_loss, means)
    named = ", ".join(cfg.ablate)
    return (
        f"ablated ({cfg.ablation}) {named}: loss {found['base_loss']:.4f} -> {found['ablated_loss']:.4f} "
        f"({found['rise']:+.4f}) on {where}"
    )


def patching(model: Network, ids: Tensor, tokenizer: object, cfg: DictConfig) -> str:
    """The patching heatmaps of the input (clean) against patch= (corrupted), written beside the checkpoint."""
    from andrea.lens.patch_report import patching_report, write_patching

    corrupted = torch.tensor([encode_prompt(tokenizer, str(cfg.patch), model.vocab_size)], device=cfg.device)  # type: ignore[arg-type]  # a Tokenizer or TokenIds
    if corrupted.shape != ids.shape:
        raise SettingError(
            f"patch= is {corrupted.shape[1]} tokens and the input {ids.shape[1]}: patching puts each position of "
            "one run into the same position of the other, so give a corruption of the same length"
        )
    answers = None
    if cfg.answer is not None:
        answers = (one_token(tokenizer, cfg.answer, "answer"), one_token(tokenizer, cfg.wrong, "wrong"))
        if not all(0 <= token < model.vocab_size for token in answers):
            raise SettingError(
                f"answer={cfg.answer}, wrong={cfg.wrong}: ids outside the vocabulary 0..{model.vocab_size - 1}"
            )
    report = patching_report(model, ids, corrupted, token_labels(tokenizer, ids[0].tolist()), answers)
    title = f"{Path(cfg.ckpt_path).name}: the input patched into {cfg.patch!r}"
    return write_patching(report, Path(cfg.ckpt_path).with_suffix(""), title)


def one_token(tokenizer: object, value: object, key: str) -> int:
    """answer= or wrong=: a token id, or text that is exactly one token (" Mary" with GPT-2's tokenizer)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if str(value).isdigit():
        return int(str(value))
    ids = tokenizer.encode(str(value))  # type: ignore[attr-defined]  # a Tokenizer or TokenIds
    if len(ids) != 1:
        raise SettingError(f"{key}={value!r} is {len(ids)} tokens ({ids}); give one token, or its id")
    return int(ids[0])
