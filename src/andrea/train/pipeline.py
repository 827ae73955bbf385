"""train(cfg): validate, build, fit, validate, summarise. The Hydra app in cli/train.py wraps it."""

from __future__ import annotations

import shlex
import time
import warnings
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from omegaconf import DictConfig
from rich.console import Console
from torch.nn import Module

from andrea.data.sampler import ResumableTrainData
from andrea.models.network import network
from andrea.train.config import Parts, validate
from andrea.train.hydra_run import is_multirun, job_log, task_overrides
from andrea.train.lit.attempts import RunRecord, ended_by
from andrea.train.lit.dashboards import dashboard
from andrea.train.lit.module import NonFiniteLossError
from andrea.train.lit.progress import progress_callbacks
from andrea.train.lit.resume import LAST, RESTORE_ERRORS, RestoreWatch, ResumeData, StopOnSignal, time_limit_ignored
from andrea.train.run_report import print_summary, summary
from andrea.train.studies import build as build_study
from andrea.train.studies.probe import StudyProbe
from andrea.utils.run_result import RESULT_FILE, RunResult, result_path


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
    if parts is None:  # called from Python: andrea-train has said this before it holds the run dir
        parts = validate(cfg)
        if (
            parts.finished is not None
        ):  # a finished run resumed: said in one line; its result as it was, no file touched
            print(parts.finished)
            return _left_as_it_was(cfg)
    if cfg.get("init_from") and not cfg.get("ckpt_path"):  # fine-tuning: start from GPT-2's weights
        _load_init_from(parts.module.net, cfg.init_from)
    loggers = _instantiate_all(cfg.get("logger"))
    stop, restore = StopOnSignal(Path(cfg.paths.output_dir) / "checkpoints"), RestoreWatch(cfg.get("ckpt_path"))
    record = RunRecord(stop, start, cfg.get("ckpt_path"))
    probe = StudyProbe(build_study(cfg.study)) if cfg.get("study") else None
    trainer = _trainer(cfg, loggers, [ResumeData(), record, stop, restore, *([probe] if probe else [])])
    run_dir = Path(trainer.default_root_dir)
    status = "failed"
    try:
        _fit(trainer, parts, cfg.get("ckpt_path"), restore)
        if stop.received is not None:
            status = "interrupted"
            return _interrupted(stop, record, trainer, run_dir)
        with time_limit_ignored():  # trained to the end: a late time-limit warning has nothing to save or requeue
            result = _finish(cfg, trainer, parts, record, restore, probe)
        status = "success"
    finally:
        _finish_loggers(loggers, status)
    if trainer.is_global_zero:
        print_summary(result)  # after the loggers' own closing lines (wandb's history): the verdict comes last
    return result


def _trainer(cfg: DictConfig, loggers: list, own: list[Callback]) -> L.Trainer:
    """The configured trainer, with the configured callbacks (and the progress display's) and andrea's `own`."""
    callbacks = _instantiate_all(cfg.get("callbacks"))
    if not loggers:  # logger=none: Lightning refuses a LearningRateMonitor with nothing to log to
        callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
    callbacks, console = progress_callbacks(callbacks, is_multirun())
    # Lightning adds a ModelCheckpoint of its own (a file every epoch) to a run that has none: callbacks=none, or
    # the checkpoint callbacks removed, writes no checkpoint unless trainer.enable_checkpointing=true says so
    checkpointing = cfg.trainer.get("enable_checkpointing", any(isinstance(c, ModelCheckpoint) for c in callbacks))
    return instantiate(
        cfg.trainer, callbacks=[*callbacks, *own], logger=loggers or False, enable_checkpointing=checkpointing,
        **console,
    )  # fmt: skip


def _finish(
    cfg: DictConfig,
    trainer: L.Trainer,
    parts: Parts,
    record: RunRecord,
    restore: RestoreWatch,
    probe: StudyProbe | None,
) -> RunResult:
    """A run trained to its end: validated once more (cfg.validate), summarised (with its study's numbers), its
    result written."""
    run_dir = Path(trainer.default_root_dir)
    fitted = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
    final = trainer.validate(parts.module, datamodule=parts.datamodule, verbose=False)[0] if cfg.get("validate") else {}
    result = summary(cfg, trainer, {**fitted, **final}, record, run_dir, parts.memory)
    result.study = probe.results(trainer, parts.module) if probe else None
    if trainer.is_global_zero:
        result.write(result_path(run_dir, keep_existing=restore.trained_steps(trainer) == 0))
    return result


def _fit(trainer: L.Trainer, parts: Parts, ckpt_path: str | None, restore: RestoreWatch) -> None:
    """trainer.fit, its refusals in one line: a checkpoint whose training state cannot be restored, a loss that
    turned non-finite (with the checkpoint kept)."""
    try:
        with warnings.catch_warnings():
            # Lightning cannot see that our data resume mid-epoch exactly (ResumableTrainData keeps
            # the sampler's position in the checkpoint), and warns that the loader is not resumable.
            if isinstance(parts.datamodule, ResumableTrainData):
                warnings.filterwarnings(
                    "ignore",
                    message=".*checkpoint that ended before the epoch ended and your dataloader is not resumable",
                )
            trainer.fit(parts.module, datamodule=parts.datamodule, ckpt_path=ckpt_path)
    except RESTORE_ERRORS as err:
        refused = restore.failure(err)
        if refused is None:
            raise
        raise refused from None
    except NonFiniteLossError as err:
        last = Path(trainer.default_root_dir) / "checkpoints" / LAST
        raise NonFiniteLossError(f"{err}: {last if last.exists() else 'no checkpoint written yet'}") from None


def _left_as_it_was(cfg: DictConfig) -> RunResult:
    """The result of the finished run `cfg.ckpt_path` belongs to (its run dir's result.json), or, where that is
    gone, what the checkpoint says: completed, at its step."""
    from andrea.models.files.checkpoint import read_checkpoint

    checkpoint = Path(cfg.ckpt_path)
    left = checkpoint.parent.parent / RESULT_FILE
    try:
        result = RunResult.read(left) if left.is_file() else None
    except ValueError:
        result = None
    if result is not None and result.status == "completed":
        return result
    step = int(read_checkpoint(checkpoint).get("global_step", 0))
    return RunResult("completed", 0, str(checkpoint.parent.parent), global_step=step)


def _load_init_from(net: Module, folder: str) -> None:
    """The folder's weights into the network validate() shaped after them: GPT-2's (andrea.models.files.gpt2), or
    an OLMo 3 or Gemma 3 family's (andrea.models.files.hf_families); or an andrea-train checkpoint's, every weight
    but a selection's (andrea.models.files.checkpoint.load_run_weights)."""
    from andrea.models.files.checkpoint import load_run_weights
    from andrea.models.files.gpt2 import load_weights
    from andrea.models.files.hf_families import FAMILIES
    from andrea.models.files.hf_folder import model_type_of

    if folder.endswith(".ckpt"):
        load_run_weights(net, Path(folder))
        return
    family = FAMILIES.get(str(model_type_of(Path(folder))))
    if family is None:
        load_weights(net, folder, len(network(net).attention))
    else:
        family.load_weights(net, Path(folder), family.net_config(Path(folder)))


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


def _finish_loggers(loggers: list, status: str) -> None:
    """Close every logger run, so the next job in this process starts a run of its own."""
    for logger in loggers:
        dashboard(logger).finish(status)
