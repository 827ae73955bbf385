"""result.json: what every andrea-train job leaves in its run dir, written and read here only.

A completed run holds its summary (losses, speed, curves, the heads found, the resolved config);
an interrupted one, the signal, its checkpoint and the command that resumes it; a failed one (a
sweep's job), the error. Each status writes its own keys, the same keys every time.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from andrea.utils.files import atomic_write

RESULT_FILE = "result.json"


def result_path(run_dir: Path, keep_existing: bool = False) -> Path:
    """Where a run writes its result: RESULT_FILE, or, with `keep_existing` (a finished run resumed, training
    no step) and one already there, result-attempt-<n>.json beside it, so the run's results are kept."""
    path = run_dir / RESULT_FILE
    if not keep_existing or not path.exists():
        return path
    n = 2
    while (run_dir / f"result-attempt-{n}.json").exists():
        n += 1
    return run_dir / f"result-attempt-{n}.json"


_COMPLETED = (
    "status", "exit_code", "overrides", "train_loss", "train_acc", "val_loss", "val_acc", "val_acc_macro",
    "val_perplexity", "eval_sets", "tokens_per_s", "tokens_per_s_steps", "parameters", "curves", "wall_s",
    "tokens_per_cpu_s", "load_max", "memory_estimate", "global_step", "epochs", "run_dir", "attention_maps",
    "attention_maps_skipped", "head_roles", "roles", "verdict", "verdict_step", "verdict_cadence", "first_token_mass",
    "kv_cache", "cache_bytes", "study", "attempts", "log", "environment", "config",
)  # fmt: skip
KEYS = {
    "completed": _COMPLETED,
    "interrupted": (
        "status",
        "signal",
        "exit_code",
        "global_step",
        "checkpoint",
        "resume",
        "attempts",
        "run_dir",
        "log",
    ),  # fmt: skip
    "failed": ("status", "exit_code", "error", "overrides", "attempts", "run_dir", "log"),
}


@dataclass
class RunResult:
    """One job's result. `status` is completed, interrupted or failed (killed and timed-out jobs of a
    sweep are failed with their own word: KEYS lists the keys each writes)."""

    status: str
    exit_code: int | str | None
    run_dir: str
    overrides: list[str] = field(default_factory=list)
    error: str | None = None  # failed: `Type: first line of the message`
    signal: int | None = None  # interrupted: the signal, its checkpoint, and the command that resumes the run
    checkpoint: str | None = None
    resume: str | None = None
    train_loss: float | None = None  # the mean of the last steps (andrea.train.lit.RunStats)
    train_acc: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None
    val_acc_macro: float | None = None  # accuracy per class, averaged over the classes (MAD's figure)
    val_perplexity: float | None = None
    eval_sets: dict[str, dict[str, float]] | None = None  # the data's evaluation sets: name -> loss, acc, acc_macro
    tokens_per_s: float | None = None  # the median over the steps (the summary's and the sweep table's figure)
    tokens_per_s_steps: dict[str, float] | None = None  # median, p25, p75 over the steps
    tokens_per_cpu_s: float | None = None  # per second of the process's CPU time (all its threads)
    load_max: dict[str, float] | None = None  # the highest 1-minute load average seen while training, and the cores
    parameters: int | None = None
    curves: dict[str, list] | None = None  # {"train": [[step, loss], ...], "val": [...]}
    wall_s: float | None = None  # the whole run's: every attempt's summed
    memory_estimate: dict[str, Any] | None = None
    global_step: int | None = None
    epochs: int | None = None
    attention_maps: str | None = None
    attention_maps_skipped: int = 0
    head_roles: dict[str, float] = field(default_factory=dict)
    roles: dict[str, dict] = field(default_factory=dict)  # the best head per role
    verdict: dict[str, Any] | None = None
    verdict_step: int | None = None  # the step of the first record whose verdict was met
    verdict_cadence: int | None = None  # the steps since the record before it: met within that many steps
    first_token_mass: list[float] | None = None  # per layer, the last record's raw weight on key 0
    kv_cache: dict[str, Any] | None = None  # numbers a token keeps in the KV cache, all layers (models.network)
    cache_bytes: dict[str, Any] | None = None  # a sequence's cache per layer, full context: kind, mixer, cache, bytes
    study: dict[str, Any] | None = None  # a reproduction's records and final numbers (andrea.train.studies)
    # each attempt of the run (a resume, a requeue): attempt, start_step, last_step, ended, wall_s (lit.attempts)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    log: str | None = None  # where the job's output went: a launched job's own log, else Hydra's log file
    environment: dict[str, Any] | None = None  # commit, versions, CPU, threads, seed (andrea.utils.environment)
    config: dict[str, Any] | None = None  # the resolved config

    def as_dict(self) -> dict[str, Any]:
        """The keys its status writes (a job killed or timed out: those of a failed one)."""
        values = dataclasses.asdict(self)
        return {key: values[key] for key in KEYS.get(self.status, KEYS["failed"])}

    def write(self, path: Path) -> Path:
        """To `path` (a run dir's RESULT_FILE, or an attempt's file beside it), whole or not at all."""
        with atomic_write(path) as partial:
            partial.write_text(json.dumps(self.as_dict(), indent=2))
        return path

    @classmethod
    def read(cls, path: Path) -> RunResult:
        """A result.json as written by `write`; ValueError in one line for anything else."""
        try:
            values = json.loads(Path(path).read_text())
        except (ValueError, RecursionError):
            raise ValueError(f"{path} is not JSON; it is not an andrea-train result") from None
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(values, dict) or "status" not in values or not set(values) <= names:
            raise ValueError(f"{path} is not an andrea-train result (its keys: {', '.join(map(str, values))})")
        return cls(**{"exit_code": None, "run_dir": str(Path(path).parent), **values})
