"""What this Hydra run is: its mode, the user's overrides, its names and folders, this process's rank.

Read by the config's resolvers (andrea.train.resolvers), the validation step and the pipeline; nothing
here builds or checks anything. The writes: a resume's config, once the run is accepted; what a refused job
wrote, removed again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException


def _hydra() -> DictConfig | None:
    try:
        return HydraConfig.get()  # type: ignore[return-value]  # typed HydraConf: it is its DictConfig
    except ValueError:  # composed without a Hydra run (tests, notebooks)
        return None


def is_multirun() -> bool:
    hydra = _hydra()
    return hydra is not None and hydra.mode == RunMode.MULTIRUN


RANK_VARIABLES = ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID")  # Lightning's launcher, torchrun, SLURM


def is_rank_zero_process() -> bool:
    """Whether this process is the first of a distributed run (or the only one): the one that owns
    the run dir. Read from the environment, before Lightning has set anything up."""
    return all(os.environ.get(name, "0") == "0" for name in RANK_VARIABLES)


def task_overrides() -> list[str]:
    """The overrides the user gave this run (a multirun job's own; not the ckpt_path a requeued SLURM job
    resumes from, andrea.train.slurm), [] outside a Hydra run."""
    from andrea.train.slurm import added_overrides

    hydra = _hydra()
    added = added_overrides()
    return [o for o in hydra.overrides.task if o not in added] if hydra else []


def job_number() -> int | None:
    """This multirun job's number (its folder in the sweep dir), None outside a multirun."""
    hydra = _hydra()
    return int(hydra.job.num) if hydra is not None and is_multirun() else None


def launcher_target() -> str:
    """The multirun's launcher `_target_`, "" outside a multirun."""
    hydra = _hydra()
    return str(OmegaConf.select(hydra, "launcher._target_", default="")) if hydra is not None and is_multirun() else ""


def job_log() -> str | None:
    """Where this run's output goes: a launched job's own log (submitit's, for hydra/launcher=local and
    slurm: everything the process printed, its errors too), else Hydra's log file in the run dir."""
    if os.environ.get("SUBMITIT_FOLDER"):  # set by submitit in the jobs it runs
        from submitit import JobEnvironment

        return str(JobEnvironment().paths.stderr)
    hydra = _hydra()
    try:
        return OmegaConf.select(hydra, "job_logging.handlers.file.filename", default=None) if hydra else None
    except OmegaConfBaseException:  # a config composed outside a Hydra run (tests, notebooks) has no runtime
        return None


def sweep_group() -> str | None:
    """The sweep's folder name in a multirun (one logger group per sweep), else None."""
    hydra = _hydra()
    return Path(hydra.sweep.dir).name if hydra is not None and is_multirun() else None


def run_name() -> str | None:
    """A logger run name: the job's overrides in a multirun, else the run folder's name."""
    hydra = _hydra()
    if hydra is None:
        return None
    if is_multirun():
        return f"{hydra.job.num}:{','.join(sorted(task_overrides())) or 'defaults'}"
    output_dir = OmegaConf.select(hydra, "runtime.output_dir", throw_on_missing=False)
    return Path(output_dir).name if output_dir else None


def run_id(ckpt_path: str | None = None) -> str | None:
    """The logger run id: a new one for a fresh run, the run folder's own when resuming from a
    checkpoint, so a resumed run continues its wandb run and a reused folder starts a new one."""
    hydra = _hydra()
    output_dir = OmegaConf.select(hydra, "runtime.output_dir", throw_on_missing=False) if hydra else None
    if not output_dir:
        return None
    saved = Path(output_dir) / ".run_id"
    if ckpt_path and saved.exists():
        return saved.read_text().strip()
    if not is_rank_zero_process():
        return None  # a DDP child: only rank 0's logger writes, and rank 0 owns the file
    if output_dir not in _NEW_RUN_IDS:  # one id per run, however often the config is resolved
        _NEW_RUN_IDS[output_dir] = uuid.uuid4().hex[:16]
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(_NEW_RUN_IDS[output_dir])
    return _NEW_RUN_IDS[output_dir]


_NEW_RUN_IDS: dict[str, str] = {}


def config_subdir(output_dir: str) -> str | None:
    """Where Hydra writes the run's composed config as the job starts: `.hydra`, in a run dir that holds no
    run's config yet. Nowhere in one that does (a resume): `write_attempt_config` writes this attempt's beside it
    once the run is accepted, so a refused resume writes nothing into the run dir. Nowhere in the other processes
    of a distributed run started together (SLURM's tasks): rank 0 writes it."""
    if not is_rank_zero_process():
        return None
    if output_dir not in _CONFIG_SUBDIRS:  # Hydra resolves it more than once per job
        later = (Path(output_dir) / ".hydra" / "config.yaml").exists()
        _CONFIG_SUBDIRS[output_dir] = None if later else ".hydra"
    return _CONFIG_SUBDIRS[output_dir]


_CONFIG_SUBDIRS: dict[str, str | None] = {}  # None: a later attempt, whose config write_attempt_config writes


HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")  # what Hydra writes into the config subdir


def write_attempt_config(composed: str) -> None:
    """This attempt's config, as Hydra writes a run's first (`composed`: the job's config as YAML, as it came
    from Hydra), in `.hydra/attempt-<n>` of a run dir that holds an earlier attempt's, which is never
    overwritten. Called once the run is accepted and its run dir held: a refused resume, or one into a run dir
    in use, writes nothing. Nothing to write where Hydra wrote it (a run's first attempt)."""
    hydra = _hydra()
    if hydra is None or _CONFIG_SUBDIRS.get(str(hydra.runtime.output_dir), "") is not None:
        return  # outside a Hydra run, or its first attempt: Hydra wrote the config
    first = Path(hydra.runtime.output_dir) / ".hydra"
    n = 2
    while (first / f"attempt-{n}").exists():
        n += 1
    attempt = first / f"attempt-{n}"
    attempt.mkdir()
    hydra_node = HydraConfig.instance().cfg  # `hydra:` and the node under it, as Hydra saves it
    texts = (composed, OmegaConf.to_yaml(hydra_node), OmegaConf.to_yaml(hydra.overrides.task))
    for name, text in zip(HYDRA_FILES, texts, strict=True):
        (attempt / name).write_text(text, encoding="utf-8")


def discard_this_attempt() -> None:
    """Remove what Hydra wrote for this attempt in a run dir that was there before (`.hydra`'s files where the run
    had none; a later attempt's config is written only once the run is accepted) and its job log while it is
    empty. A resume refused, or with nothing left to do, leaves the run dir as it found it."""
    hydra = _hydra()
    if hydra is None:
        return
    run_dir = Path(hydra.runtime.output_dir)
    subdir = _CONFIG_SUBDIRS.get(str(run_dir))
    if subdir == ".hydra":  # the run had no config of Hydra's: these are this attempt's
        for name in HYDRA_FILES:
            (run_dir / subdir / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (run_dir / subdir).rmdir()  # only if nothing else is there
    log = run_dir / f"{hydra.job.name}.log"
    if log.is_file() and log.stat().st_size == 0:  # opened for this attempt, nothing written
        log.unlink()


def discard_new_run_dir() -> None:
    """Remove this run's dir when Hydra made it for this very job and it holds nothing else (the composed
    config and the log): a refused config leaves no run dir behind. A dir that was there before (a resume)
    or holds anything more is kept."""
    hydra = _hydra()
    if hydra is None:
        return
    output_dir = str(hydra.runtime.output_dir)
    run_dir = Path(output_dir)
    if _CONFIG_SUBDIRS.get(output_dir) != ".hydra" or not run_dir.is_dir():
        return  # a later attempt in an existing run dir
    if all(entry.name == ".hydra" or entry.suffix == ".log" for entry in run_dir.iterdir()):
        shutil.rmtree(run_dir, ignore_errors=True)
