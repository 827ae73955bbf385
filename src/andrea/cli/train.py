"""andrea-train: the Hydra app that trains any model of the zoo.

    andrea-train                                   # the repetition task, sdpa, causal, MHA, on CPU
    andrea-train experiment=lookback attention=eager heads=gqa
    andrea-train -m attention=naive,eager,sdpa heads=mha,gqa
    andrea-train experiment=gpu/zoology --dry-run  # each job's steps, tokens and H100 minutes; nothing trained
    andrea-train --help | --cfg job | -m ... | --shell-completion install=bash

Input refused before any work exits 2 with one line; a run that fails on the way exits 1
with one line; a signal exits 128 + its number, with last.ckpt saved.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import ExitStack
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf

from andrea.cli.app import fail, run_app
from andrea.train.hydra_run import (
    discard_new_run_dir,
    discard_this_attempt,
    is_multirun,
    is_rank_zero_process,
    write_attempt_config,
)

if TYPE_CHECKING:
    from andrea.train.config import Parts
    from andrea.utils.run_result import RunResult

COMMAND = "andrea-train"


@hydra.main(version_base="1.3", config_path="pkg://andrea.conf", config_name="train")
def train_app(cfg: DictConfig) -> float | None:
    quiet_console()  # before the checks: they may import matplotlib, whose first import logs its font cache
    with ExitStack() as job:
        parts = _validated(cfg, job)
        if parts is None:
            return None
        _one_copy_of_each_line()
        result = _train(cfg, parts)
    if result.status == "interrupted":  # in a multirun this ends the sweep too
        raise SystemExit(result.exit_code)  # 128 + the signal: the shell's convention for "ended by a signal"
    metric = cfg.get("optimized_metric")
    return getattr(result, metric.replace("/", "_"), None) if metric else None


def _validated(cfg: DictConfig, job: ExitStack) -> Parts | None:
    """The run's parts, built once, and its run dir held until the job ends; a bad config refused before
    any file is written; None for a finished run resumed (nothing left to train: said, nothing written)."""
    from andrea.train.config import ConfigError, validate  # torch: imported once a job runs, not for --help
    from andrea.train.run_dir import REQUEUE_WAIT_S, DiskError, RunDirInUse, hold
    from andrea.train.slurm import restart_count

    composed = OmegaConf.to_yaml(cfg)  # this attempt's config as Hydra composed it: the checks fill init_from='s in
    try:
        parts = validate(cfg)
        if parts.finished is not None:  # a finished run resumed: said in one line, no file touched (not the lock)
            discard_this_attempt()
            print(f"{COMMAND}: {parts.finished}")
            return None
        if is_rank_zero_process():  # the other processes of a DDP or SLURM run share its run dir
            # one live run per run dir, until this job ends; a requeued job's previous attempt may still be exiting
            job.enter_context(hold(cfg.paths.output_dir, wait_s=REQUEUE_WAIT_S if restart_count() else 0))
            write_attempt_config(composed)  # a resume's, now that it is accepted and the run dir is its own
    except (ConfigError, RunDirInUse, DiskError) as err:  # a run dir that cannot be written: before any work
        if is_multirun():
            raise  # the job is marked failed in the sweep summary
        if isinstance(err, ConfigError):  # refused before any work: nothing to keep
            discard_this_attempt()
            discard_new_run_dir()
        fail(COMMAND, str(err), 2)
    return parts


def _one_copy_of_each_line() -> None:
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # a deprecation inside Lightning itself
    # an epoch shorter than trainer.log_every_n_steps still logs: its end reads the steps' numbers
    warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
    # `import lightning` adds a console handler of its own; Hydra's root handlers already print
    # (and file) every record, so keep one copy of each line.
    lightning_logger = logging.getLogger("lightning")
    for handler in list(lightning_logger.handlers):
        lightning_logger.removeHandler(handler)


def _train(cfg: DictConfig, parts: Parts) -> RunResult:
    from andrea.train.lit.module import NonFiniteLossError
    from andrea.train.lit.resume import CheckpointRestoreError
    from andrea.train.pipeline import train
    from andrea.train.run_dir import DiskError

    try:
        return train(cfg, parts)
    except (NonFiniteLossError, DiskError) as err:
        if is_multirun():
            raise
        fail(COMMAND, str(err), 1)
    except CheckpointRestoreError as err:  # the checkpoint refused, before any step: input, not a failure
        if is_multirun():
            raise
        fail(COMMAND, str(err), 2)


def quiet_console() -> None:
    """andrea's lines on the console, other tools' in the run's log (Hydra's file handler keeps every record):
    their info lines (Lightning's accelerator lines, tips and model table, matplotlib's font cache) and the hint
    Lightning gives wherever `srun` is installed, run under SLURM or not; wandb silent (its files keep its run).
    A multirun job keeps only warnings and errors on the console: its one line is the sweep's."""
    os.environ.setdefault("WANDB_SILENT", "true")
    logging.captureWarnings(True)  # warnings as records: each still on the console, and in the log
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:  # the console, not the job's log file (a FileHandler)
            handler.setLevel(logging.WARNING)
            handler.addFilter(_not_for_the_console)


def _not_for_the_console(record: logging.LogRecord) -> bool:
    """False for what the console need not show: Lightning's srun hint (the run is not under SLURM's srun)."""
    return not (
        record.name == "py.warnings" and "The `srun` command is available on your system" in record.getMessage()
    )


def main() -> None:
    if "--dry-run" in sys.argv[1:]:  # every job's plan (andrea.train.plan): nothing trained, nothing written
        given = [arg for arg in sys.argv[1:] if arg != "--dry-run"]
        if any(arg.startswith("hparams_search=") for arg in given):  # Optuna draws its points as it goes
            fail(COMMAND, "--dry-run plans a sweep whose jobs are known before it runs: drop hparams_search=", 2)
        sys.argv = [sys.argv[0], "--multirun", *given, "hydra.sweeper.dry_run=true"]
    run_app(COMMAND, train_app, help_text=help_text)


def help_text() -> str:
    """`andrea-train --help`: conf/hydra/default.yaml's help template, its header, groups and experiments resolved,
    without composing the run's config (nothing in it depends on one) and without Hydra's own group listing, which
    builds a config repository per group: 1.5 s of a 2 s --help."""
    from importlib.resources import files

    from andrea.train import resolvers

    resolvers.register()
    hydra_node = OmegaConf.load(str(files("andrea.conf") / "hydra" / "default.yaml"))
    return str(OmegaConf.create({"hydra": hydra_node}).hydra.help.template)


if __name__ == "__main__":
    main()
