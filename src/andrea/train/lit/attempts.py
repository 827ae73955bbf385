"""RunRecord: a run's attempts, kept in its checkpoints, so a run resumed (a SLURM requeue, a time limit's
resume, a resume by hand) reports the whole run: its wall time summed over the attempts, each attempt's
start step, last step and why it ended.

Each checkpoint holds the attempts so far, the one saving it last (its end, when a signal stopped it).
A resumed attempt closes the last one with what it can learn: the checkpoint's own word, else the result
its run dir holds, else that SLURM requeued the job, else `unknown`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities.types import STEP_OUTPUT

from andrea.train import slurm
from andrea.utils.rules import integer, number, read_list, read_value
from andrea.utils.run_result import RESULT_FILE, RunResult

# Why an attempt ended: its run ran to the end, the time limit's warning stopped it, the scheduler took it
# back (and ran it again), a person stopped it, it raised, its process died, or nobody can tell
ENDS = ("finished", "time limit", "preempted", "cancelled", "failed", "killed", "unknown")
FIELDS = ("attempt", "start_step", "last_step", "ended", "wall_s")
STEP, SECONDS = integer(0), number(0.0)  # an attempt's steps and its wall time


def ended_by(signum: int) -> str:
    """What a stop on signal `signum` means: the time limit's warning, or somebody's (or something's) stop."""
    return "time limit" if signum == slurm.TIME_LIMIT_SIGNAL else "cancelled"


class RunRecord(L.Callback):
    """The attempts of this run: the earlier ones (from the checkpoint this attempt resumed from) and this one,
    which started `started` (time.perf_counter()) and resumed from `ckpt_path` (None: the run's first)."""

    def __init__(self, stopped: Any, started: float, ckpt_path: str | None = None) -> None:
        self.stopped = stopped  # the StopOnSignal of this attempt: its `received` signal names a stop
        self.started = started
        self.ckpt_path = ckpt_path
        self.earlier: list[dict[str, Any]] = []
        self.start_step = self.last_step = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start_step = self.last_step = trainer.global_step

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: STEP_OUTPUT, batch: Any, batch_idx: int
    ) -> None:
        self.last_step = trainer.global_step  # before a checkpoint of this step is saved (checkpointing comes last)

    def wall_s(self) -> float:
        """The run's wall time: the earlier attempts' and this one's so far."""
        return sum(a["wall_s"] for a in self.earlier) + time.perf_counter() - self.started

    def attempts(self, ended: str | None) -> list[dict[str, Any]]:
        """Every attempt, this one ending (as far as it knows) with `ended`."""
        now = {
            "attempt": len(self.earlier) + 1,
            "start_step": self.start_step,
            "last_step": self.last_step,
            "ended": ended,
            "wall_s": round(time.perf_counter() - self.started, 3),
        }
        return [*self.earlier, now]

    def state_dict(self) -> dict[str, Any]:
        received = self.stopped.received
        return {"attempts": self.attempts(None if received is None else ended_by(received))}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        attempts = [_attempt(a) for a in read_list(state_dict.get("attempts"), "the run record's attempts")]
        if attempts and attempts[-1]["ended"] is None:
            attempts[-1]["ended"] = self._how_it_ended(attempts[-1])
        elif attempts and attempts[-1]["ended"] == "cancelled" and slurm.restart_count():
            attempts[-1]["ended"] = "preempted"  # stopped by SIGTERM and run again: the scheduler requeued it
        self.earlier = attempts

    def _how_it_ended(self, attempt: dict[str, Any]) -> str:
        """The end of an attempt its checkpoint did not see: the result it left beside the checkpoint."""
        left = _result_beside(self.ckpt_path)
        if left is not None and left.status == "completed" and left.global_step == attempt["last_step"]:
            return "finished"
        if left is not None and left.status in ("failed", "killed"):
            return left.status
        return "preempted" if slurm.restart_count() else "unknown"


def _result_beside(ckpt_path: str | None) -> RunResult | None:
    """The result.json of the run dir a checkpoint lies in (<run dir>/checkpoints/<file>), if it holds one."""
    result = Path(ckpt_path).parent.parent / RESULT_FILE if ckpt_path else None
    try:
        return RunResult.read(result) if result is not None and result.is_file() else None
    except ValueError:
        return None


def _attempt(value: Any) -> dict[str, Any]:
    """One attempt as plain values, checked: a crafted checkpoint cannot pose anything else as one."""
    if not isinstance(value, dict) or set(value) != set(FIELDS):
        raise ValueError(f"a run record's attempt must have the keys {', '.join(FIELDS)}: {str(value)[:100]}")
    for key in ("attempt", "start_step", "last_step"):
        read_value(value[key], STEP, f"a run record's attempt's {key}")
    read_value(value["wall_s"], SECONDS, "a run record's attempt's wall_s")
    if value["ended"] is not None and value["ended"] not in ENDS:
        raise ValueError(f"a run record's attempt ended {value['ended']!r}, not one of {', '.join(ENDS)}")
    return {k: value[k] for k in FIELDS}
