"""Start-up: how long andrea takes before it trains, beside what Lightning alone takes to import.

    python scripts/bench_startup.py              # 3 rounds (about 1 minute on 2 cores)
    python scripts/bench_startup.py --rounds 5

Each candidate is a fresh process, the candidates interleaved in a fresh random order each round. The table
gives each one's median seconds (min-max over the rounds):

    andrea-train --help               the help, which imports neither torch nor Lightning
    import lightning                  the floor: Lightning imports torch, torchmetrics (whose text and audio
                                      metrics import transformers and scipy.signal when they are installed)
    import andrea.train.pipeline      the training pipeline, everything a run imports before its config
    andrea-train, first step          the default run (logger=none, one step) from the process's start to its
                                      first training batch: imports, composing, checks, build, Lightning's set-up
    ... with wandb (the default)      the same with the default logger, wandb offline: its run starts before the
                                      first batch (wandb 0.31 imports its launch module on every init)
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
TRAIN = str(Path(sys.executable).with_name("andrea-train"))


def _help() -> float:
    start = time.perf_counter()
    subprocess.run([TRAIN, "--help"], check=True, capture_output=True)
    return time.perf_counter() - start


def _imported(module: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - start


def _first_step(folder: Path, logger: str) -> float:
    folder.mkdir(parents=True)
    stamp = folder / "first_step"
    overrides = [
        "trainer.max_steps=1", f"logger={logger}", f"hydra.run.dir={folder / 'run'}",
        "+callbacks.first_step._target_=startup_probe.FirstStep", f"+callbacks.first_step.path={stamp}",
    ]  # fmt: skip
    start = time.time()
    subprocess.run([TRAIN, *overrides], check=True, capture_output=True, env=_env(), cwd=folder)
    return float(stamp.read_text()) - start


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SCRIPTS), os.environ.get("PYTHONPATH")]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        candidates = {
            "andrea-train --help": lambda i: _help(),
            "import lightning": lambda i: _imported("lightning"),
            "import andrea.train.pipeline": lambda i: _imported("andrea.train.pipeline"),
            "andrea-train, first step": lambda i: _first_step(Path(tmp) / f"none{i}", "none"),
            "... with wandb (the default)": lambda i: _first_step(Path(tmp) / f"wandb{i}", "wandb"),
        }
        times: dict[str, list[float]] = {name: [] for name in candidates}
        for i in range(args.rounds):
            for name in random.sample(list(candidates), len(candidates)):
                times[name].append(candidates[name](i))
    print(f"| start-up ({args.rounds} rounds) | median s | min-max s |\n|---|---:|---:|")
    for name, seconds in times.items():
        print(f"| {name} | {statistics.median(seconds):.2f} | {min(seconds):.2f}-{max(seconds):.2f} |")


if __name__ == "__main__":
    main()
