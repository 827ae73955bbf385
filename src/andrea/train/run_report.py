"""What a run that trained to its end reports: its RunResult (losses, speed, curves, the heads found, its
attempts, the resolved config) and its lines on the console (in a multirun, one line; the rest in its log)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import lightning as L
from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from torch.nn import Module

from andrea.lens.heads import metric_name
from andrea.lens.verdict import describe, verdict
from andrea.models.memory import Estimate
from andrea.models.network import cache_bytes, kv_cache_widths, network
from andrea.train.hydra_run import is_multirun, job_log, job_number, task_overrides
from andrea.train.lit.attempts import RunRecord
from andrea.train.lit.attention_maps import AttentionMaps
from andrea.train.lit.run_stats import RunStats
from andrea.train.lit.val_metrics import MAIN, SCORES, set_names
from andrea.train.sweep import done_line, job_line
from andrea.utils.environment import environment
from andrea.utils.run_result import RunResult

log = logging.getLogger(__name__)


def summary(
    cfg: DictConfig,
    trainer: L.Trainer,
    metrics: dict[str, float],
    record: RunRecord,
    run_dir: Path,
    memory: Estimate | None,
) -> RunResult:
    callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]  # set by Lightning, undeclared
    stats = next((c for c in callbacks if isinstance(c, RunStats)), None)
    maps = next((c for c in callbacks if isinstance(c, AttentionMaps)), None)
    return RunResult(
        status="completed",
        exit_code=0,
        overrides=task_overrides(),
        train_acc=metrics.get("train/acc_epoch"),
        val_loss=metrics.get("val/loss"),
        val_acc=metrics.get("val/acc"),
        val_acc_macro=metrics.get("val/acc_macro"),
        val_perplexity=metrics.get("val/perplexity"),
        eval_sets=_eval_sets(trainer, metrics),
        parameters=sum(p.numel() for p in trainer.lightning_module.parameters()),
        wall_s=record.wall_s(),  # every attempt's
        attempts=record.attempts("finished"),
        log=job_log(),
        memory_estimate=_memory_estimate(memory),
        global_step=trainer.global_step,
        epochs=trainer.current_epoch,
        run_dir=str(run_dir),
        verdict=_verdict(trainer, maps),
        kv_cache=_kv_cache(trainer.lightning_module),
        cache_bytes=_cache_bytes(trainer.lightning_module),
        config=cast(dict, OmegaConf.to_container(cfg, resolve=True)),  # a DictConfig gives a dict
        environment=environment(cfg.get("seed")),
        **_speed_and_curves(stats, metrics),
        **_maps_found(maps),
    )


def _speed_and_curves(stats: RunStats | None, metrics: dict[str, float]) -> dict[str, Any]:
    """What RunStats measured: the train loss of the last steps, tokens/s, the curves (none without it)."""
    if stats is None:
        return {"train_loss": metrics.get("train/loss_epoch")}
    steps = stats.rate_summary()  # median, p25, p75 over the logging intervals
    return {
        "train_loss": stats.final_train_loss if stats.train_curve else metrics.get("train/loss_epoch"),
        # one meaning wherever andrea prints or tabulates it: the median over the steps (the whole run's mean when
        # it had too few logging intervals to take one), beside its spread
        "tokens_per_s": steps["median"] if steps else stats.tokens_per_s,
        "tokens_per_s_steps": steps,
        "tokens_per_cpu_s": stats.tokens_per_cpu_s,  # per second of the process's CPU time: a busy machine's
        "load_max": stats.load_max,
        "curves": {"train": stats.train_curve, "val": stats.val_curve},
    }


def _maps_found(maps: AttentionMaps | None) -> dict[str, Any]:
    """What the attention maps callback drew and found: its folder, the heads' roles, the first verdict's step."""
    if maps is None:
        return {}
    return {
        "attention_maps": str(maps.out_dir) if maps.written else None,
        "attention_maps_skipped": maps.skipped,  # records dropped while the drawing worker was busy
        "head_roles": {metric_name(key): score for key, score in maps.scores.items()},
        "roles": maps.roles,
        "verdict_step": maps.verdict_step,
        "verdict_cadence": maps.verdict_cadence,
        "first_token_mass": maps.first_token_mass,
    }


def _kv_cache(module: L.LightningModule) -> dict[str, Any] | None:
    """The KV cache's numbers per token (this run's head configuration beside MHA's and MQA's), or None for
    a network andrea does not know, or one without attention."""
    net = getattr(module, "net", None)
    return (kv_cache_widths(network(net)) or None) if isinstance(net, Module) and hasattr(net, "mixers") else None


def _cache_bytes(module: L.LightningModule) -> dict[str, Any] | None:
    """A sequence's cache per layer at the network's full context, in its parameters' precision, for a network
    of andrea's; None otherwise (the summary says it only where a mixer is not attention: the KV cache line
    says the rest)."""
    net = getattr(module, "net", None)
    if not isinstance(net, Module) or not hasattr(net, "mixers"):
        return None
    number = next(net.parameters()).element_size()
    return cache_bytes(network(net), network(net).max_context, number)


def _verdict(trainer: L.Trainer, maps: AttentionMaps | None) -> dict | None:
    """Whether the head the task needs appeared (from the maps' last probe), or that it needs none."""
    if maps is not None and maps.verdict is not None:
        return maps.verdict
    pattern = getattr(trainer.datamodule, "attention_pattern", None)  # type: ignore[attr-defined]  # set by Lightning
    if pattern is not None and pattern.role is None:
        return verdict(pattern, {})
    return None


def _memory_estimate(need: Estimate | None) -> dict | None:
    """The training memory andrea.models.memory estimated for this config before the run."""
    if need is None:
        return None
    return {"bytes": need.total_bytes, "parameters": need.parameters, "text": need.describe()}


def _eval_sets(trainer: L.Trainer, metrics: dict[str, float]) -> dict[str, dict[str, float]] | None:
    """Each evaluation set's loss and accuracies (the data module's, beside its validation set), or None."""
    names = set_names(getattr(trainer, "datamodule", None))[1:]
    found = {name: {m: float(metrics[f"{MAIN}_{name}/{m}"]) for m in SCORES if f"{MAIN}_{name}/{m}" in metrics}
             for name in names}  # fmt: skip
    return found or None


def _cache_lines(sizes: dict[str, Any] | None) -> list[str]:
    """Each layer's cache in bytes, where a layer is not attention (else the KV cache line says it all)."""
    if not sizes or all(layer["mixer"] == "attention" for layer in sizes["layers"]):
        return []
    kept = ", ".join(f"{layer['mixer']} {layer['bytes']:,}" for layer in sizes["layers"])
    mha = sizes["mha_layer"]
    return [f"cache of a {sizes['length']}-token sequence, bytes per layer: {kept} (an MHA layer: {mha:,})"]


def _scores(scores: dict[str, float]) -> str:
    return ", ".join(f"{metric} {scores[metric]:.4f}" for metric in SCORES if metric in scores)


def _found_lines(result: RunResult) -> list[str]:
    """The summary's lines after the first: memory, run dir, KV cache, maps, roles, and the verdict last."""
    lines = [f"estimated training memory: {result.memory_estimate['text']}"] if result.memory_estimate else []
    lines.append(f"run dir: {result.run_dir}")
    offline = sorted(Path(result.run_dir).glob("wandb/offline-run-*"))  # wandb is silent: where its run is
    if offline:
        lines.append(f"dashboard: wandb's offline run {offline[-1]} (wandb sync {offline[-1]} uploads it)")
    if result.kv_cache:
        cache = result.kv_cache
        lines.append(
            f"KV cache: {cache['kept']:,} numbers a token ({cache['heads']}; MHA would keep {cache['mha']:,}, "
            f"MQA {cache['mqa']:,})"
        )
    lines += _cache_lines(result.cache_bytes)
    if result.eval_sets:
        lines.append("evaluation sets: " + " · ".join(f"{name} {_scores(s)}" for name, s in result.eval_sets.items()))
    if result.attention_maps:
        skipped = result.attention_maps_skipped
        behind = f" ({skipped} records skipped: the drawing worker was behind)" if skipped else ""
        lines.append(f"attention maps: {result.attention_maps}{behind}")
    if result.roles:
        lines.append(f"best head per role: {describe(result.roles)}")
    return lines + _verdict_lines(result)  # last: what the run found


def _verdict_lines(result: RunResult) -> list[str]:
    """The verdict, with the step it was first met at and the cadence of the records it was read from."""
    if not result.verdict:
        return []
    cadence = f" ±{result.verdict_cadence}" if result.verdict_cadence else ""
    first = f"; first met at step {result.verdict_step}{cadence}" if result.verdict_step is not None else ""
    return [f"verdict: {result.verdict['text']}{first}"]


def print_summary(result: RunResult) -> None:
    """The run's summary: on the console for a single run; in a multirun job, one line on the
    console and the whole summary in the job's log."""

    lines = [done_line(result), *_found_lines(result)]
    console = Console(soft_wrap=True, highlight=False)  # a path or a summary line never wraps, piped or not
    if not is_multirun():
        for line in lines:
            console.print(line, markup=False)
        return
    for line in lines:
        log.info(line)  # the job's log file: in a multirun the console shows warnings and this one line
    console.print(job_line(result, job_number()), markup=False)
