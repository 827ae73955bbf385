"""A sweep over settings and seeds: each setting's seeds as one row (mean and range), its curves as a band,
and the settings' table first in report.html, as a person sees it in a browser."""

import json
import math

import pytest

from andrea.train.sweep import write_summary
from andrea.train.sweep_groups import seed_groups, spread
from andrea.utils.run_result import RunResult


def seeded_job(
    sweep_dir, number, mechanism, seed, val, step=None, mass=(0.3, 0.1), status="completed", extra=(), acc=None
):
    """A job's result.json as andrea-train writes it for `mechanism=<m> seed=<s>` (and `extra` overrides)."""
    run_dir = sweep_dir / str(number)
    run_dir.mkdir(parents=True)
    train = [[s, math.log(64) * math.exp(-s / (30 + 5 * seed))] for s in range(0, 100)]
    result = {
        "status": status, "exit_code": 0, "overrides": [f"mechanism={mechanism}", *extra, f"seed={seed}"],
        "val_loss": val, "val_acc": acc, "verdict_cadence": 16 if step else None, "tokens_per_cpu_s": 500.0 + seed,
        "load_max": {"load": 3.5 if seed == 2 else 1.0, "cores": 2.0}, "parameters": 43392, "run_dir": str(run_dir),
        "environment": {"commit": "abc123", "torch": "2.13.0", "threads": 2, "seed": seed},
        "curves": {"train": train, "val": []},
        "tokens_per_s_steps": {"median": 1000.0 * (seed + 1), "p25": 900.0, "p75": 1100.0},
        "verdict": {"role": "induction", "appeared": step is not None, "best": "L1H0", "score": 1.0 - val,
                    "text": "..."},
        "verdict_step": step, "first_token_mass": list(mass),
        "cache_bytes": {"length": 32, "mha_layer": 16384, "layers": [
            {"layer": 0, "mixer": "gla", "bytes": 512}, {"layer": 1, "mixer": "attention", "bytes": 16384}]},
    } if status == "completed" else {"status": status, "exit_code": 1, "overrides": [f"mechanism={mechanism}",
                                     f"seed={seed}"], "run_dir": str(run_dir), "error": "RuntimeError: x"}  # fmt: skip
    (run_dir / "result.json").write_text(json.dumps(result))


def results(overrides_per_job):
    return [RunResult("completed", 0, str(n), overrides) for n, overrides in enumerate(overrides_per_job)]


def test_jobs_that_differ_only_in_their_seed_are_one_setting():
    jobs = results([["mechanism=a", "seed=0"], ["mechanism=a", "seed=1"], ["mechanism=b", "seed=0"]])
    assert [(g.label, len(g.results)) for g in seed_groups(jobs)] == [("mechanism=a", 2), ("mechanism=b", 1)]
    assert seed_groups(results([["mechanism=a"], ["mechanism=b"]])) == []  # nothing shares a setting
    assert spread([1.0, 2.0, 4.5], 1) == "2.5 (1.0 to 4.5)" and spread([3.0]) == "3.000" and spread([]) == ""


def test_groups_md_gives_each_setting_the_mean_and_range_of_its_seeds(tmp_path):
    seeded_job(tmp_path, 0, "softmax", 0, 0.10, step=64, mass=(0.4, 0.2))
    seeded_job(tmp_path, 1, "softmax", 1, 0.30, step=96, mass=(0.2, 0.2))
    seeded_job(tmp_path, 2, "sink", 0, 0.20, step=None)
    seeded_job(tmp_path, 3, "sink", 1, 0.0, status="failed")
    write_summary(tmp_path)
    header, _, softmax, sink = (tmp_path / "groups.md").read_text().splitlines()
    assert header.split(" | ")[:5] == ["| setting", "seeds", "val_loss", "verdict met at the end", "first met at step"]
    assert softmax.split(" | ")[1:7] == [
        "2 of 2", "0.200 (0.100 to 0.300)", "2 of 2", "80 (64 to 96) ±16", "0.80 (0.70 to 0.90)",
        "L0 0.30 (0.20 to 0.40) · L1 0.20 (0.20 to 0.20)",
    ]  # fmt: skip
    assert sink.split(" | ")[1:5] == ["1 of 2", "0.200", "0 of 1", ""]  # the failed seed counted, not averaged
    cache = header.split(" | ").index("cache (bytes a sequence)")
    assert softmax.split(" | ")[cache] == "16,896"  # the layers' caches summed: a state and a KV cache
    assert (tmp_path / "curves_by_setting.png").stat().st_size > 10_000


def test_best_over_a_nuisance_axis_stands_one_run_for_each_seed(tmp_path):
    """report.best_over=[model.optimizer.lr]: of each seed's runs over the learning rates, the most accurate."""
    (tmp_path / "multirun.yaml").write_text("report:\n  best_over: [model.optimizer.lr]\n")
    number = 0
    for mechanism in ("softmax", "sink"):
        for seed in (0, 1):
            for lr, acc in (("1e-3", 0.5), ("1e-2", 0.9 if mechanism == "softmax" else 0.4)):
                lr_override = [f"model.optimizer.lr={lr}"]
                val = 1.0 - acc - 0.01 * seed
                seeded_job(tmp_path, number, mechanism, seed, val, step=32, extra=lr_override, acc=acc + 0.01 * seed)
                number += 1
    write_summary(tmp_path)
    _, _, softmax, sink, *note = (tmp_path / "groups.md").read_text().splitlines()
    assert softmax.split(" | ")[:3] == [
        "| mechanism=softmax (best of 2 over model.optimizer.lr)",
        "2 of 2",
        "0.095 (0.090 to 0.100)",
    ]  # lr 1e-2's runs, each seed's best
    assert sink.split(" | ")[2] == "0.495 (0.490 to 0.500)"  # lr 1e-3's
    assert note == ["", "Tied for the earliest verdict (first met within one record of each other): "
                    "mechanism=softmax (best of 2 over model.optimizer.lr), mechanism=sink (best of 2 over "
                    "model.optimizer.lr)."]  # fmt: skip


def test_each_job_row_gives_its_cpu_rate_load_and_environment_and_busy_jobs_are_named(tmp_path):
    for seed in range(3):
        seeded_job(tmp_path, seed, "softmax", seed, 0.1)
    rows = write_summary(tmp_path)
    assert [row["load"] for row in rows] == ["1.00 on 2 cores", "1.00 on 2 cores", "3.50 on 2 cores (busy)"]
    assert [row["tokens_per_cpu_s"] for row in rows] == [500.0, 501.0, 502.0]
    assert (
        (tmp_path / "summary.md")
        .read_text()
        .splitlines()[-1]
        .startswith("Jobs 2 trained while the machine's load exceeded its cores")
    )


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_report_shows_the_settings_before_the_jobs(tmp_path, browser):
    from selenium.webdriver.common.by import By

    for number, (mechanism, seed) in enumerate([(m, s) for m in ("softmax", "gated") for s in range(3)]):
        seeded_job(tmp_path, number, mechanism, seed, 0.1 + 0.05 * seed, step=64 + 16 * seed)
    write_summary(tmp_path)
    browser.get((tmp_path / "report.html").as_uri())
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings == ["By setting, seeds grouped: mean (min to max)", "Every job"]
    tables = browser.find_elements(By.TAG_NAME, "table")
    settings = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in tables[0].find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert [row[:3] for row in settings] == [["mechanism=softmax", "3 of 3", "0.150 (0.100 to 0.200)"]] + [
        ["mechanism=gated", "3 of 3", "0.150 (0.100 to 0.200)"]
    ]
    assert len(tables[1].find_elements(By.CSS_SELECTOR, "tbody tr")) == 6
    images = browser.find_elements(By.TAG_NAME, "img")
    assert [i.get_attribute("alt") for i in images] == [
        "train loss of every setting over its seeds",
        "train and val loss of every job",
    ]
    assert all(browser.execute_script("return arguments[0].naturalWidth", i) > 500 for i in images)
    browser.save_screenshot(str(tmp_path / "report.png"))
