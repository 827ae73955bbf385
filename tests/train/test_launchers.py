"""The rows hydra/launcher=local and slurm leave for a job that ended without a result, without a cluster."""

import csv
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.core.plugins import Plugins

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional `sweep` extra is not installed")
# Hydra's plugin scan executes the hydra_plugins modules again (load_module): scanned first, the submitit plugin's
# classes stay the ones andrea's launchers derive from, for the tests that compare them after this one
Plugins.instance()

from andrea.train.sweep import write_summary  # noqa: E402
from hydra_plugins.andrea_launchers import _Settled  # noqa: E402  # after the skip: needs the `sweep` extra


def settle(tmp_path: Path, log_written: bool) -> dict[str, str]:
    """The row of job 0, ended by the scheduler, whose log `log_written` or not."""
    log = tmp_path / ".submitit" / "5_0" / "5_0_0_log.err"
    if log_written:
        log.parent.mkdir(parents=True)
        log.write_text("training...\n")
    job = SimpleNamespace(paths=SimpleNamespace(stderr=log), job_id="5_0")
    (tmp_path / "0").mkdir()
    settled = _Settled(job, ["seed=1"], tmp_path / "0")  # type: ignore[arg-type]  # what died() reads of a job
    settled.died("the scheduler ended job 5_0: CANCELLED (exit code 0)", 0)
    write_summary(tmp_path)
    with open(tmp_path / "summary.csv") as f:
        (row,) = csv.DictReader(f)
    return row


def test_a_job_cancelled_before_it_started_says_it_never_started(tmp_path):
    row = settle(tmp_path, log_written=False)
    assert row["status"] == "killed" and row["log"] == ""  # no file that does not exist
    assert row["error"] == (
        "JobDied: the scheduler ended job 5_0: CANCELLED (exit code 0); it never started (it wrote no log)"
    )


def test_a_job_killed_while_running_names_its_log(tmp_path):
    row = settle(tmp_path, log_written=True)
    assert row["log"].endswith("5_0_0_log.err") and Path(row["log"]).is_file()
    assert row["error"].endswith(f"; its log: {row['log']}")
