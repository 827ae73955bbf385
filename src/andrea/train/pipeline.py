"""train(cfg): validate, build, fit, validate, summarise. The Hydra app in cli/train.py wraps it."""

from __future__ import annotations

import logging
import shlex
import time
import warnings
from pathlib import Path
from typing import Any, cast

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from torch.nn import Module

from andrea.data.sampler import ResumableTrainData
from andrea.lens.verdict import describe, verdict
from andrea.models.memory import Estimate
from andrea.models.network import kv_cache_widths, network
from andrea.train.config import Parts, validate
from andrea.train.hydra_run import is_multirun, job_log, job_number, task_overrides
from andrea.train.lit.attempts import RunRecord, ended_by
from andrea.train.lit.attention_maps import AttentionMaps
from andrea.train.lit.module import NonFiniteLossError
from andrea.train.lit.progress import progress_callbacks
from andrea.train.lit.resume import LAST, RESTORE_ERRORS, RestoreWatch, ResumeData, StopOnSignal, time_limit_ignored
from andrea.train.lit.run_stats import RunStats
from andrea.train.sweep import done_line, job_line
from andrea.utils.run_result import RESULT_FILE, RunResult, result_path

log = logging.getLogger(__name__)


def _instantiate_all(group: DictConfig | None) -> list:
    """Every entry of a group of named objects (callbacks, loggers) that has a `_target_`."""
    if not group:
        return []
    return [instantiate(node) for node in group.values() if node is not None and "_target_" in node]


def train(cfg: DictConfig, parts: Parts | None = None) -> RunResult:
    """Run one training job on the parts `validate(cfg)` built (it is called here when not given: the
    command line calls it first, to refuse a config before it locks the run dir); returns (and writes
    to <run dir>/result.json) its summary."""
    start = time.perf_counter()
    parts = parts or validate(cfg)
    datamodule, module = parts.datamodule, parts.module
    if cfg.get("init_from") and not cfg.get("ckpt_path"):  # fine-tuning: start from GPT-2's weights
        _load_init_from(module.net, cfg.init_from)
    loggers = _instantiate_all(cfg.get("logger"))
    callbacks = _instantiate_all(cfg.get("callbacks"))
    if not loggers:  # logger=none: Lightning refuses a LearningRateMonitor with nothing to log to
        callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
    stop, restore = StopOnSignal(Path(cfg.paths.output_dir) / "checkpoints"), RestoreWatch()
    record = RunRecord(stop, start, cfg.get("ckpt_path"))
    callbacks, console = progress_callbacks(callbacks, is_multirun())
    # Lightning adds a ModelCheckpoint of its own (a file every epoch) to a run that has none: callbacks=none, or
    # the checkpoint callbacks removed, writes no checkpoint unless trainer.enable_checkpointing=true says so
    checkpointing = cfg.trainer.get("enable_checkpointing", any(isinstance(c, ModelCheckpoint) for c in callbacks))
    trainer = instantiate(
        cfg.trainer, callbacks=[*callbacks, ResumeData(), record, stop, restore], logger=loggers or False,
        enable_checkpointing=checkpointing, **console,
    )  # fmt: skip
    run_dir = Path(trainer.default_root_dir)
    status = "failed"
    try:
        try:
            with warnings.catch_warnings():
                # Lightning cannot see that our data resume mid-epoch exactly (ResumableTrainData keeps
                # the sampler's position in the checkpoint), and warns that the loader is not resumable.
                if isinstance(datamodule, ResumableTrainData):
                    warnings.filterwarnings(
                        "ignore",
                        message=".*checkpoint that ended before the epoch ended and your dataloader is not resumable",
                    )
                trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        except RESTORE_ERRORS as err:
            refused = restore.failure(err, cfg.get("ckpt_path"))
            if refused is None:
                raise
            raise refused from None
        except NonFiniteLossError as err:
            last = run_dir / "checkpoints" / LAST
            raise NonFiniteLossError(f"{err}: {last if last.exists() else 'no checkpoint written yet'}") from None
        if stop.received is not None:
            status = "interrupted"
            return _interrupted(stop, record, trainer, run_dir)
        with time_limit_ignored():  # trained to the end: a late time-limit warning has nothing to save or requeue
            fitted = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
            final = trainer.validate(module, datamodule=datamodule, verbose=False)[0] if cfg.get("validate") else {}
            result = _summary(cfg, trainer, {**fitted, **final}, record, run_dir, parts.memory)
            if trainer.is_global_zero:
                result.write(result_path(run_dir, keep_existing=restore.trained_steps(trainer) == 0))
        status = "success"
    finally:
        _finish_loggers(loggers, status)
    if trainer.is_global_zero:
        _print_summary(result)  # after the loggers' own closing lines (wandb's history): the verdict comes last
    return result


def _load_init_from(net: Module, folder: str) -> None:
    """GPT-2's weights into the network validate() shaped after them (andrea.models.files.gpt2)."""
    from andrea.models.files.gpt2 import load_weights
    from andrea.models.network import network

    load_weights(net, folder, len(network(net).attention))


def resume_command(run_dir: Path) -> str:
    """The andrea-train command that continues the run in `run_dir` from its last.ckpt."""
    kept = [o for o in task_overrides() if not o.startswith(("ckpt_path=", "hydra.run.dir="))]
    resume = [f"hydra.run.dir={run_dir}", f"ckpt_path={run_dir / 'checkpoints' / LAST}"]
    return " ".join(["andrea-train", *map(shlex.quote, kept + resume)])


def _interrupted(stop: StopOnSignal, record: RunRecord, trainer: L.Trainer, run_dir: Path) -> RunResult:
    assert stop.received is not None  # called once a signal came
    result = RunResult(
        attempts=record.attempts(ended_by(stop.received)),
        status="interrupted",
        signal=int(stop.received),
        exit_code=128 + int(stop.received),
        global_step=trainer.global_step,
        checkpoint=str(stop.checkpoint),
        resume=resume_command(run_dir),
        run_dir=str(run_dir),
        log=job_log(),
    )
    if trainer.is_global_zero:
        result.write(run_dir / RESULT_FILE)
        Console(stderr=True).print(
            f"stopped by signal {result.signal} at step {result.global_step}; saved {result.checkpoint}\n"
            f"resume with: {result.resume}",
            soft_wrap=True,
        )
    return result


def _summary(
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
        train_loss=stats.final_train_loss if stats and stats.train_curve else metrics.get("train/loss_epoch"),
        train_acc=metrics.get("train/acc_epoch"),
        val_loss=metrics.get("val/loss"),
        val_acc=metrics.get("val/acc"),
        val_perplexity=metrics.get("val/perplexity"),
        tokens_per_s=stats.tokens_per_s if stats else None,
        tokens_per_s_steps=stats.rate_summary() if stats else None,  # median, p25, p75 over the steps
        parameters=sum(p.numel() for p in trainer.lightning_module.parameters()),
        curves={"train": stats.train_curve, "val": stats.val_curve} if stats else None,
        wall_s=record.wall_s(),  # every attempt's
        attempts=record.attempts("finished"),
        log=job_log(),
        memory_estimate=_memory_estimate(memory),
        global_step=trainer.global_step,
        epochs=trainer.current_epoch,
        run_dir=str(run_dir),
        attention_maps=str(maps.out_dir) if maps and maps.written else None,
        attention_maps_skipped=maps.skipped if maps else 0,  # records dropped while the drawing worker was busy
        head_roles=maps.scores if maps else {},
        roles=maps.roles if maps else {},
        verdict=_verdict(trainer, maps),
        verdict_step=maps.verdict_step if maps else None,
        first_token_mass=maps.first_token_mass if maps else None,
        kv_cache=_kv_cache(trainer.lightning_module),
        config=cast(dict, OmegaConf.to_container(cfg, resolve=True)),  # a DictConfig gives a dict
    )


def _kv_cache(module: L.LightningModule) -> dict[str, Any] | None:
    """The KV cache's numbers per token (this run's head configuration beside MHA's and MQA's), or None for
    a network andrea does not know, or one without attention."""
    net = getattr(module, "net", None)
    return (kv_cache_widths(network(net)) or None) if isinstance(net, Module) and hasattr(net, "attention") else None


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


def _print_summary(result: RunResult) -> None:
    """The run's summary: on the console for a single run; in a multirun job, one line on the
    console and the whole summary in the job's log."""

    lines = [done_line(result)]
    if result.memory_estimate:
        lines.append(f"estimated training memory: {result.memory_estimate['text']}")
    lines.append(f"run dir: {result.run_dir}")
    if result.kv_cache:
        cache = result.kv_cache
        lines.append(
            f"KV cache: {cache['kept']:,} numbers a token ({cache['heads']}; MHA would keep {cache['mha']:,}, "
            f"MQA {cache['mqa']:,})"
        )
    if result.attention_maps:
        skipped = result.attention_maps_skipped
        behind = f" ({skipped} records skipped: the drawing worker was behind)" if skipped else ""
        lines.append(f"attention maps: {result.attention_maps}{behind}")
    if result.roles:
        lines.append(f"best head per role: {describe(result.roles)}")
    if result.verdict:  # last: what the run found
        first = f"; first met at step {result.verdict_step}" if result.verdict_step is not None else ""
        lines.append(f"verdict: {result.verdict['text']}{first}")
    console = Console(soft_wrap=True, highlight=False)  # a path or a summary line never wraps, piped or not
    if not is_multirun():
        for line in lines:
            console.print(line, markup=False)
        return
    for line in lines:
        log.info(line)  # the job's log file: in a multirun the console shows warnings and this one line
    console.print(job_line(result, job_number()), markup=False)


def _finish_loggers(loggers: list, status: str) -> None:
    """Close every logger run, so the next job in this process starts a run of its own."""
    from lightning.pytorch.loggers import WandbLogger

    for logger in loggers:
        logger.finalize(status)
    if any(isinstance(logger, WandbLogger) for logger in loggers):
        import wandb

        wandb.finish(exit_code=0 if status == "success" else 1)
