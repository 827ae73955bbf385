"""What hydra/launcher=slurm (hydra_plugins.andrea_launchers) asks of SLURM, through its own commands.

    job_end(job_id)            the scheduler's word on a job that ended (state, reason, exit code), None
                               while it lives; from `scontrol show job`, else `sacct` (a cluster with
                               accounting, once the job has left the controller's memory)
    gpus_per_node(acc, n)      the launcher's GPUs per node for trainer.accelerator and trainer.devices
    restart_count()            how often SLURM has requeued this job (preemption, `scontrol requeue`, a
                               time limit's requeue): 0 in its first attempt and outside SLURM
    resume_overrides(o, dir)   a requeued job's overrides, resuming from its run dir's last.ckpt
    requeue_this_job()         `scontrol requeue` this job: after the time limit's warning signal, the job
                               saved last.ckpt and stops, and SLURM starts it again
    outside_training(dir)      the time limit's warning before training (stop: requeued) and after (ignored)

Waiting for a sweep's jobs: andrea.train.slurm_wait.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from andrea.train.run_dir import LAST

# Job states in which a job may still leave a result (sinfo(1) "JOB STATE CODES"); any other is its end
LIVE_STATES = {
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
    "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "PREEMPTED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
}  # fmt: skip  # PREEMPTED: on its way back to PENDING when requeued; a held job waits for `scontrol release`
COMMAND_TIMEOUT_S = 60
# The signal SLURM sends ahead of a job's time limit: submitit's (`#SBATCH --signal=USR2@<signal_delay_s>`)
TIME_LIMIT_SIGNAL = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), None)


@dataclass(frozen=True)
class JobEnd:
    """How the scheduler ended a job: its state (CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, FAILED...),
    the reason it gives and the exit code (128 + n for a job ended by signal n; None where unknown)."""

    state: str
    reason: str
    exit_code: int | None

    def __str__(self) -> str:
        code = f"exit code {'unknown' if self.exit_code is None else self.exit_code}"
        return (
            f"{self.state} ({code})"
            if self.reason in ("", "None", self.state)
            else f"{self.state} ({self.reason}; {code})"
        )


def job_end(job_id: str) -> JobEnd | None:
    """The end of job `job_id` (`12345`, or an array task's `12345_3`), None while it may still run or the
    controller did not answer (ask again later). A job the controller no longer holds (MinJobAge) is read
    from sacct; one neither knows any more has ended, how is unknown (a PREEMPTED job not requeued, say)."""
    return end_from(job_id, scontrol_record(job_id))


def end_from(job_id: str, record: dict[str, str] | None) -> JobEnd | None:
    """job_end from the controller's answer (None: it did not answer)."""
    if record is None:
        return None
    record = record or _sacct(job_id)
    if not record:
        return JobEnd("UNKNOWN", "no longer known to the scheduler", None)
    state = (record.get("State") or "UNKNOWN").split()[0]  # sacct says "CANCELLED by 0"
    SEEN[job_id] = Sighting(state, time.time())
    if state in LIVE_STATES:
        return None
    return JobEnd(state, record.get("Reason") or record["State"], _exit_code(record.get("ExitCode", "")))


def _exit_code(field: str) -> int | None:
    """SLURM's `status:signal` as a shell's exit code."""
    status, _, signum = field.partition(":")
    if not status.isdigit():
        return None
    return 128 + int(signum) if signum.isdigit() and int(signum) else int(status)


def scontrol_record(job_id: str) -> dict[str, str] | None:
    """The controller's record of the job; {} for a job it does not hold, None when it did not answer."""
    done = _run(["scontrol", "show", "job", "--oneliner", job_id])
    if done is None or (done.returncode != 0 and "Invalid job id" not in done.stderr):
        return None
    fields: dict[str, str] = {}
    for item in done.stdout.split():  # the first of each name: a later field's text (a Comment) cannot pose as one
        name, equals, value = item.partition("=")
        if equals:
            fields.setdefault(name, value)
    if done.returncode != 0 or "JobState" not in fields:
        return {}
    return {"State": fields["JobState"], "Reason": fields.get("Reason", ""), "ExitCode": fields.get("ExitCode", "")}


def _sacct(job_id: str) -> dict[str, str] | None:
    done = _run(["sacct", "--noheader", "--parsable2", "-X", "-o", "JobID,State,ExitCode", "-j", job_id])
    if done is None or done.returncode != 0:
        return None  # "Slurm accounting storage is disabled"
    for line in done.stdout.splitlines():
        jid, state, exit_code = (line.split("|") + ["", "", ""])[:3]
        if jid == job_id:
            return {"State": state, "ExitCode": exit_code}
    return None


def _run(command: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


@dataclass
class Sighting:
    """The state the scheduler last gave for a job, and when (time.time()); None: it never answered for it."""

    state: str | None = None
    at: float | None = None

    def __str__(self) -> str:
        if self.state is None or self.at is None:
            return "state unknown (the controller never answered for it)"
        return f"{self.state} at {time.strftime('%H:%M:%S', time.localtime(self.at))}"


SEEN: dict[str, Sighting] = {}  # job id -> what the scheduler last said of it, in this process


def restart_count() -> int:
    count = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(count) if count.isdigit() else 0


def resume_overrides(overrides: list[str], run_dir: Path) -> list[str]:
    """`overrides`, plus ckpt_path=<run dir>/checkpoints/last.ckpt in a requeued attempt whose earlier
    one left that checkpoint (and the user gave no ckpt_path of their own)."""
    checkpoint = run_dir / "checkpoints" / LAST
    if restart_count() == 0 or not checkpoint.is_file() or any(o.startswith("ckpt_path=") for o in overrides):
        return overrides
    print(f"requeued (restart {restart_count()}): resuming from {checkpoint}", file=sys.stderr, flush=True)
    quoted = str(checkpoint).replace("'", "\\'")  # a quoted value of Hydra's grammar
    _ADDED.append(f"ckpt_path='{quoted}'")
    return [*overrides, _ADDED[-1]]


_ADDED: list[str] = []  # the overrides resume_overrides added in this process: not the user's


def added_overrides() -> list[str]:
    """The overrides this process's job was given by `resume_overrides`, not by the user: a job's label, its row
    and its logger run's name show the user's own only."""
    return list(_ADDED)


def gpus_per_node(accelerator: str, devices: Any) -> Any:
    """hydra/launcher=slurm's gpus_per_node: the trainer's devices on GPUs, none on CPUs (`--gpus-per-node`
    asks a CPU partition for a resource it does not have, and sbatch refuses the job)."""
    return devices if str(accelerator) in ("gpu", "cuda", "auto") else None


def this_job_id() -> str:
    """This job's id as scontrol takes it: `<array job>_<task>` for a task of an array."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ["SLURM_JOB_ID"]


def outside_training(run_dir: Path) -> Callable[[int, FrameType | None], None]:
    """A job's handler of the time limit's warning outside training (andrea.train.lit.resume.StopOnSignal has it
    during training): before the run has ended, the job stops (exit 128 + n) and requeues itself; once it
    ended (its result.json completed, or failed), the warning is ignored: a finished job is never requeued
    (submitit's own handler would requeue it, past max_num_timeout)."""
    from andrea.utils.run_result import RESULT_FILE, RunResult

    def handle(signum: int, frame: FrameType | None) -> None:
        try:
            status = RunResult.read(run_dir / RESULT_FILE).status
        except (OSError, ValueError):
            status = None
        if status in ("completed", "failed", "killed"):
            said = f"signal {signum} (the time limit's warning) came after the run {status}: not requeued"
            print(said, file=sys.stderr)
            return
        raise SystemExit(128 + signum)

    return handle


def requeue_this_job() -> None:
    job_id = this_job_id()
    print(f"requeueing job {job_id} (restart {restart_count() + 1}) to resume from its last.ckpt", file=sys.stderr)
    done = _run(["scontrol", "requeue", job_id])
    if done is None or done.returncode != 0:  # the job still ends as interrupted, its last.ckpt saved
        print(f"scontrol requeue {job_id} failed: {done.stderr.strip() if done else 'no answer'}", file=sys.stderr)


SLURM_TOOLS = ("sbatch", "srun", "scontrol")  # submitit submits with sbatch; a job's tasks start under srun


def cluster_problem() -> str | None:
    """Why hydra/launcher=slurm cannot submit from here, in one line (None: it can): a SLURM tool missing from
    PATH, or no controller answering `scontrol ping`. Asked once, before the first job is submitted."""
    for tool in SLURM_TOOLS:
        if shutil.which(tool) is None:
            return (
                f"hydra/launcher=slurm needs SLURM's {tool} on PATH, and this machine has none; install SLURM's "
                'client tools (or eval "$(scripts/slurm_cluster.sh env)"), or use hydra/launcher=local'
            )
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        ping = subprocess.CompletedProcess(["scontrol", "ping"], 1, "", str(err))
    answer = " ".join((ping.stdout + ping.stderr).split())
    if ping.returncode != 0 or " is DOWN" in answer:
        return (
            f"hydra/launcher=slurm: no SLURM controller answers (scontrol ping: {answer or 'no answer'}); start it "
            "(scripts/slurm_cluster.sh start), or use hydra/launcher=local"
        )
    return None
