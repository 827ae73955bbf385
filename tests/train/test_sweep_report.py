"""The sweep report as a person sees it: report.html opened in headless Chromium."""

import json
import math
from pathlib import Path

import pytest

from andrea.train.sweep import write_summary


def fake_job(sweep_dir, number, overrides, status="completed", val=0.5):
    """A job's result.json as andrea-train writes it, with curves that fall from log(64)."""
    run_dir = sweep_dir / str(number)
    run_dir.mkdir(parents=True)
    train = [[step, math.log(64) * math.exp(-step / (20 + 10 * number))] for step in range(0, 192)]
    result = {
        "status": status, "exit_code": 0 if status == "completed" else 2, "overrides": overrides,
        "train_loss": train[-1][1], "val_loss": val, "val_acc": 0.99, "parameters": 9344 - 1024 * number,
        "tokens_per_s_steps": {"median": 200000.0, "p25": 190000.0, "p75": 210000.0}, "wall_s": 3.2,
        "run_dir": str(run_dir), "curves": {"train": train, "val": [[64, val * 2], [128, val * 1.2], [192, val]]},
        "roles": {"previous_token": {"best": "L0H1", "score": 0.95, "queries": 248, "transformer_lens": 0.92},
                  "induction": {"best": None, "score": None, "queries": 0, "transformer_lens": None}},
        "verdict": {"role": "previous_token", "appeared": True, "best": "L0H1", "text": "found"},
        **({"error": "ConfigError: heads.n_kv_head=3 does not divide heads.n_head=4"} if status != "completed" else {}),
    }  # fmt: skip
    (run_dir / "result.json").write_text(json.dumps(result))


def test_summary_md_keeps_markup_from_overrides_as_text(tmp_path):
    fake_job(tmp_path, 0, ["data.path=<img src=x onerror=alert(1)>|x", "attention=eager"])
    fake_job(tmp_path, 1, ["data.path=plain", "attention=eager"])
    write_summary(tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    assert "<img" not in summary and "&lt;img src=x onerror=alert(1)&gt;\\|x" in summary
    header, _, *rows = summary.splitlines()
    assert len(rows) == 2 and all(row.count(" | ") == header.count(" | ") for row in rows)  # no cell broke a row


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_report_renders_every_job_and_the_curves(tmp_path, browser):
    from selenium.webdriver.common.by import By

    sweep = tmp_path / "sweep"
    fake_job(sweep, 0, ["attention=eager", "heads=mha", "trainer.max_epochs=3"], val=0.4)
    fake_job(sweep, 1, ["attention=sdpa", "heads=gqa", "trainer.max_epochs=3"], val=0.6)
    fake_job(sweep, 2, ["attention=sdpa", "heads.n_kv_head=3", "trainer.max_epochs=3"], status="failed")
    write_summary(sweep)
    browser.get((sweep / "report.html").as_uri())
    assert browser.title == "andrea sweep sweep"
    image = browser.find_element(By.TAG_NAME, "img")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 500
    header = [th.get_attribute("data-key") for th in browser.find_elements(By.CSS_SELECTOR, "thead th")]
    shown = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "thead th")]
    assert shown[header.index("train_loss")] == "train loss (last 20 steps)" and "wall (s)" in shown
    assert header[:3] == ["job", "differs", "status"] and "heads" in header and "verdict" in header
    rows = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert [row[1] for row in rows] == [
        "attention=eager heads=mha",
        "attention=sdpa heads=gqa",
        "attention=sdpa heads.n_kv_head=3",
    ]
    assert rows[0][header.index("heads")] == "prev L0H1 0.95 · ind n/a"
    assert rows[0][header.index("tokens_per_s_p25_p75")] == "190,000-210,000"
    failed = browser.find_elements(By.CSS_SELECTOR, "tbody tr")[2]
    assert failed.get_attribute("class") == "failed" and "ConfigError" in failed.text
    assert rows[0][header.index("wall_s")] == "3.2" and rows[0][header.index("val_loss")] == "0.400"
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")  # fits
    browser.find_elements(By.CSS_SELECTOR, "thead th")[header.index("val_loss")].click()
    browser.find_elements(By.CSS_SELECTOR, "thead th")[header.index("val_loss")].click()  # again: descending
    order = [tr.find_elements(By.TAG_NAME, "td")[1].text for tr in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert order == ["attention=sdpa heads=gqa", "attention=sdpa heads.n_kv_head=3", "attention=eager heads=mha"]
    browser.save_screenshot(str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.slow  # reason: a 6-job sweep through andrea-train, then a browser
def test_a_six_job_sweep_leaves_a_report_a_browser_shows(tmp_path, browser):
    import subprocess
    import sys

    from selenium.webdriver.common.by import By

    from tests.compose import QUICK

    SCRIPT = str(Path(sys.executable).with_name("andrea-train"))

    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [SCRIPT, "-m", "attention=naive,eager,sdpa", "heads=mha,gqa", *QUICK, f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"sweep report: {sweep / 'report.html'} (6 of 6 jobs completed)"
    assert (sweep / "curves.png").stat().st_size > 20_000
    browser.get((sweep / "report.html").as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == [
        f"attention={a} heads={h}" for a in ("naive", "eager", "sdpa") for h in ("mha", "gqa")
    ]
    assert all(r.get_attribute("class") == "completed" for r in rows)
    assert browser.execute_script("return document.querySelector('img').naturalWidth") > 500


def test_roles_over_training_per_setting_over_its_seeds(tmp_path):
    """Each job's head_roles.csv, grouped by setting over its seeds: roles.png, and its section in report.html."""
    from andrea.train.lit import role_history
    from andrea.train.sweep_roles import best_per_step

    for number, (setting, seed) in enumerate([("sdpa", 0), ("sdpa", 1), ("eager", 0), ("eager", 1)]):
        fake_job(tmp_path, number, [f"attention={setting}", f"seed={seed}"])
        for step in (0, 50, 100, 200):
            formed = min(1.0, step / (100 + 50 * number))  # a later job forms its head later
            scores = {("induction", 1, 0): formed, ("induction", 1, 1): formed / 2, ("entropy", 1, 0): 2.0}
            role_history.append(tmp_path / str(number) / role_history.HISTORY_FILE, step, scores)
    write_summary(tmp_path)
    assert best_per_step(tmp_path / "1") == {
        "induction": pytest.approx({0: 0.0, 50: 1 / 3, 100: 2 / 3, 200: 1.0}, abs=1e-5)
    }
    assert (tmp_path / "roles.png").read_bytes()[:4] == b"\x89PNG"
    report = (tmp_path / "report.html").read_text()
    assert "<h2>Head roles over training</h2>" in report and report.count("data:image/png;base64,") >= 3


def test_a_one_epoch_sweep_shows_its_val_loss_as_bars(tmp_path):
    from andrea.train.sweep_report import plot_curves
    from andrea.utils.run_result import RunResult

    for number in range(3):
        fake_job(tmp_path, number, [f"model.optimizer.lr={number}"], val=0.5 + number)
    results = [RunResult.read(tmp_path / str(n) / "result.json") for n in range(3)]
    for result in results:
        assert result.curves is not None
        result.curves["val"] = result.curves["val"][-1:]  # one validation, at the end
    plot_curves(results, ["lr=0", "lr=1", "lr=2"], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
