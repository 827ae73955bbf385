"""docs/cluster.md (linked from docs/training.md): its cluster block runs as written, in one shell (its
`eval` sets what the later lines read), against the local cluster, with the shortening arguments its marker appends
to each andrea-train line."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compose import plain_env
from tests.readme_blocks import blocks
from tests.test_readme import PAGES, resolve

pytestmark = pytest.mark.alone  # one SLURM cluster on the machine, started and stopped by these tests

MARKER = "a SLURM cluster"


@pytest.mark.slow(reason="three SLURM sweeps of small runs (6 jobs), ~2 min")
def test_the_readme_cluster_block_runs_as_written(slurm_env, tmp_path):
    found = [b for page in PAGES for b in blocks(page) if b.marker and b.marker.startswith(f"not run here: {MARKER}")]
    (block,) = found
    appended = block.extra["andrea-train"]
    script = "\n".join(resolve(command, tmp_path, appended) for command in block.commands())
    (tmp_path / "home").mkdir()
    env = plain_env(tmp_path / "home")  # a user's shell: no SLURM_CONF until the block's eval sets it
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, f"{script}\n{done.stderr[-3000:]}"
    sweeps = sorted((tmp_path / "logs" / "multiruns").iterdir())
    statuses = []
    for sweep_dir in sweeps:
        with open(sweep_dir / "summary.csv") as f:
            statuses.append([row["status"] for row in csv.DictReader(f)])
    assert statuses == [["completed"] * 2, ["completed"] * 3, ["completed"]]
    assert all(list((sweep_dir / ".submitit").iterdir()) for sweep_dir in sweeps)  # each went through SLURM
