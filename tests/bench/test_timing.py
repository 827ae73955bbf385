"""The measuring tools the benchmarks rely on."""

import pytest
import torch

from andrea.attention import Causal, get_backend
from andrea.bench.timing import median_ms, paired_ratio, peak_memory_mib


def test_peak_memory_sees_a_transient_tensor():
    x = torch.randn(256, 256)  # 256 KiB, made before: not counted

    def work():
        big = x.repeat(4, 4)  # 4 MiB, freed before the end
        return (big.sum() + x.sum()).item()

    assert 4.0 <= peak_memory_mib(work) < 4.1


def test_peak_memory_counts_what_is_alive_at_once():
    def work():
        a = torch.ones(1024, 256)  # 1 MiB
        del a
        b = torch.ones(512, 256)  # 0.5 MiB, after the first was freed
        c = torch.ones(512, 256)  # 0.5 MiB, beside b
        return b, c

    assert 1.0 <= peak_memory_mib(work) < 1.1


def test_peak_memory_sees_inside_flex():
    """Flex runs through a compiled wrapper; its unfused CPU path still shows its score matrix."""
    q = torch.randn(1, 2, 256, 16)
    with torch.no_grad():
        flex = peak_memory_mib(lambda: get_backend("flex")(q, q, q, Causal()))
    assert flex >= 2 * 256 * 256 * 4 / 2**20  # at least the (H, T, S) fp32 scores


def test_median_ms_runs_every_candidate():
    calls = {"a": 0, "b": 0}

    def bump(name):
        calls[name] += 1

    times = median_ms({"a": lambda: bump("a"), "b": lambda: bump("b")}, repeats=3, warmup=2)
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())
    assert calls == {"a": 5, "b": 5}


def test_paired_ratio_runs_both_once_per_round():
    calls = {"a": 0, "b": 0}

    def bump(name):
        calls[name] += 1

    ratio = paired_ratio(lambda: bump("a"), lambda: bump("b"), rounds=4)
    assert ratio > 0 and calls == {"a": 5, "b": 5}


@pytest.mark.slow(reason="builds and times ANDREA-120M beside Hugging Face's GPT-2 (~16 s)")
def test_bench_model_prints_its_tables():
    """The model benchmark end to end at toy size, every registered backend (numbers are not checked: this is no
    timed test): one that cannot run here (triton without a GPU) is listed n/a with its reason, never run. Two
    lengths: the compiled model gets a graph per length (torch 2.13's dynamic-shape recompile of it fails)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "bench_model.py"
    args = ["--models", "andrea-tiny", "--seq-lens", "32", "48", "--rounds", "1", "--new-tokens", "4", "--no-peer"]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for backend in ("naive", "eager", "sdpa"):
        assert any(line.startswith(f"| andrea-tiny | 32 | train | {backend} | ") for line in lines)
    for T in (32, 48):
        assert any(line.startswith(f"| andrea-tiny | {T} | train | sdpa+compile | ") for line in lines)
    assert any(line.startswith("| andrea-tiny | 32 | train | flex | n/a [") for line in lines)
    assert any(line.startswith("| andrea-tiny | 32 | forward | triton | n/a [") for line in lines)
    assert any("unsupported: attention backend 'triton' runs on CUDA GPUs" in line for line in lines)
    assert any(line.startswith("| andrea-tiny | sdpa cache |") for line in lines)
    assert any(line.startswith("| andrea-tiny | sdpa no cache |") for line in lines)


def test_ratio_spread_pairs_rounds_and_narrows_with_more():
    from andrea.bench.timing import ratio_spread

    median, spread = ratio_spread([9.0, 18.0, 4.5, 10.0], [10.0, 20.0, 5.0, 10.0])  # ratios .9 .9 .9 1.0
    assert median == 0.9 and abs(spread - (1.0 - 0.9) / 2 / 0.9) < 1e-12  # 4 rounds: the whole range
    ratios = [0.9 + 0.2 * ((37 * i) % 101) / 100 for i in range(101)]  # 0.90 .. 1.10 shuffled
    wide, narrow = ratio_spread(ratios[:21], [1.0] * 21)[1], ratio_spread(ratios, [1.0] * 101)[1]
    assert 0 < narrow < wide < 0.1


@pytest.mark.slow  # reason: a bash script and its Python planner (3 s)
def test_the_gpu_check_s_dry_run_plans_both_parts_without_a_gpu(tmp_path):
    """scripts/gpu_check.sh --dry-run: bench_gpu.py's and bench_tiles.py's plans (cells, shapes, compiles,
    candidates, minutes), written to $OUT too, with no CUDA touched: the GPU script cannot rot unnoticed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[2]
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh"), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines == (tmp_path / "gpu_check-plan.log").read_text().splitlines()
    summary = {line.split(":")[0]: line for line in lines if " about " in line}
    assert set(summary) == {"parity", "attention", "train", "dry run", "tiles"}
    assert "28 candidates" in summary["tiles"] and "not in its default run" in summary["tiles"]
    assert any(line.startswith("tiles: d=64 dkdv: TILES (32, 128, 8, 3), then ") for line in lines)
    assert "17 cells, 48 triton compiles" in summary["parity"]  # 10 variants at head_dim 64, 2 at 128, x 4 kernels
    assert "parity: causal&document x gqa x torch.bfloat16 x alibi=True x d=128: fwd+bwd, (2, 4, 300, 128)" in lines
    assert "12 cells, 4 triton compiles, 4 flex compiles" in summary["attention"]
    assert "attention: (4, 12, 8192, 64) bf16, causal, fwd+bwd: triton, sdpa, flex" in lines
    minutes = float(summary["dry run"].split("about ")[1].split(" min")[0])  # the default run: kernel and train
    assert summary["dry run"].startswith("dry run: parity, attention, train:") and minutes <= 6.0


@pytest.mark.slow(reason="starts Python four times and runs andrea-train twice (~30 s)")
def test_bench_startup_prints_its_table():
    """The start-up benchmark end to end, one round: its five rows, each a number of seconds (not checked: this
    is no timed test). Its first-step rows prove the probe callback reached each run's first batch."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "bench_startup.py"
    done = subprocess.run([sys.executable, str(script), "--rounds", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ") and "median" not in line]
    assert [row[0].strip("| ") for row in rows] == ["andrea-train --help", "import lightning",
                                                    "import andrea.train.pipeline", "andrea-train, first step",
                                                    "... with wandb (the default)"]  # fmt: skip
    assert all(float(row[1]) > 0 for row in rows)
