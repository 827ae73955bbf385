"""Seconds from SIGINT to exit of a training run, over a few runs (min / median / max).

    .venv/bin/python scripts/signal_latency.py                     # experiment=andrea-12m-shakespeare
    .venv/bin/python scripts/signal_latency.py --runs 5 --wait 30 experiment=lookback

Each run starts andrea-train in a temporary run dir, sends SIGINT after `--wait` seconds
(start-up included), and times the way out: the current step finishes, last.ckpt is saved,
the loggers close. Prints one line per run (exit code, what the checkpoints folder holds)
and the summary. Run it alone on the machine: a parallel job doubles every time taken.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = str(Path(sys.executable).with_name("andrea-train"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--wait", type=float, default=60.0, help="seconds between start and SIGINT")
    parser.add_argument("overrides", nargs="*", default=["experiment=andrea-12m-shakespeare", "logger=csv"])
    args = parser.parse_args()
    seconds = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            run_dir = Path(folder) / "run"
            process = subprocess.Popen(
                [TRAIN, *args.overrides, f"hydra.run.dir={run_dir}"],
                cwd=folder,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(args.wait)
            sent = time.monotonic()
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=600)
            seconds.append(time.monotonic() - sent)
            kept = sorted(p.name for p in (run_dir / "checkpoints").glob("*"))  # an empty list if none was written
            last = err.strip().splitlines()[-2:] if err.strip() else []
            print(f"run {run}: exit {process.returncode}, {seconds[-1]:.2f} s from SIGINT to exit; checkpoints {kept}")
            print("   " + " / ".join(last))
    print(f"SIGINT to exit: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})")


if __name__ == "__main__":
    main()
