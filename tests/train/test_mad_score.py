"""MAD's aggregate score (andrea.train.mad_score) as mad-lab's analysis computes it: the best run over the nuisance
keys of each model, task setting and seed, a task's score the mean over its settings, the model's the mean over
the six tasks, and none while a task is missing."""

from __future__ import annotations

import json

import pytest

from andrea.data.catalog import TASKS
from andrea.train.mad_score import MAD_TASKS, mad_scores, mad_table, score_rows
from andrea.utils.run_result import RunResult

BEST_OVER = ["model.optimizer.lr", "model.optimizer.weight_decay"]


def _run(task: str, acc: float, *overrides: str, status: str = "completed") -> RunResult:
    module, _, cls = TASKS["recall" if task == "noisy_recall" else task].partition(":")
    config = {"data": {"_target_": f"{module}.{cls}", "frac_noise": 0.2 if task == "noisy_recall" else 0.0}}
    return RunResult(status, 0, "run", overrides=[f"experiment={task}", *overrides], val_acc_macro=acc, config=config)


def test_a_task_s_score_is_the_mean_over_its_settings_of_the_best_over_the_nuisance_keys():
    runs = [
        _run("recall", 0.5, "model.optimizer.lr=1e-4", "data.vocab_size=32"),
        _run("recall", 0.9, "model.optimizer.lr=1e-3", "data.vocab_size=32"),  # this setting's best
        _run("recall", 0.3, "model.optimizer.lr=1e-4", "data.vocab_size=64"),  # this one's
        _run("recall", 0.2, "model.optimizer.lr=1e-3", "data.vocab_size=64"),
        _run("recall", 1.0, "model.optimizer.lr=1e-2", "data.vocab_size=64", status="failed"),  # not counted
    ]
    (scores,) = mad_scores(runs, BEST_OVER)
    assert scores.model == "the sweep's model" and scores.tasks == {"recall": pytest.approx((0.9 + 0.3) / 2)}
    assert scores.score is None and scores.missing == [t for t in MAD_TASKS if t != "recall"]


def test_the_mad_score_is_the_mean_over_the_six_tasks_per_model():
    runs = [_run(task, 0.1 * i, "mixer=gla") for i, task in enumerate(MAD_TASKS, start=1)]
    runs += [_run(task, 0.9, "mixer=attention") for task in MAD_TASKS[:5]]
    runs += [_run("mqar", 1.0, "mixer=gla")]  # not a MAD task: left out
    gla, attention = mad_scores(runs, BEST_OVER)
    assert gla.model == "mixer=gla" and gla.score == pytest.approx(0.35)
    assert attention.model == "mixer=attention" and attention.score is None and attention.missing == ["memorization"]
    table = mad_table(score_rows([gla, attention]))
    assert "| mixer=gla | 0.100 | 0.200 | 0.300 | 0.400 | 0.500 | 0.600 | 0.350 |" in table
    assert table.splitlines()[-1].endswith("|  | missing: memorization |")


def test_every_mad_task_is_a_data_module_andrea_knows():
    assert set(MAD_TASKS) - {"noisy_recall"} <= set(TASKS)  # noisy recall: recall with noise (conf/data)


def _job(sweep, number: int, run: RunResult) -> None:
    """A job's result.json as andrea-train writes it, the fields the report reads."""
    run_dir = sweep / str(number)
    run_dir.mkdir(parents=True)
    result = {"status": run.status, "exit_code": 0, "run_dir": str(run_dir), "overrides": run.overrides,
              "val_loss": 1.0 - (run.val_acc_macro or 0), "val_acc": run.val_acc_macro,
              "val_acc_macro": run.val_acc_macro, "config": run.config, "wall_s": 2.0}  # fmt: skip
    (run_dir / "result.json").write_text(json.dumps(result))


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_sweep_report_shows_the_mad_scores(tmp_path, browser):
    """report.mad_score=true: mad_scores.md beside the sweep's tables, and its table in report.html as a person
    opens it; a model with every task has its MAD score, the other names what it misses."""
    from selenium.webdriver.common.by import By

    from andrea.train.sweep import write_summary

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("report:\n  best_over: [model.optimizer.lr]\n  mad_score: true\n")
    runs = [_run(task, acc + 0.05 * i - drop, f"mixer={mixer}", f"model.optimizer.lr={lr}")
            for mixer, acc, tasks in (("gla", 0.5, MAD_TASKS), ("attention", 0.8, MAD_TASKS[:4]))
            for i, task in enumerate(tasks) for lr, drop in (("1e-3", 0.0), ("1e-2", 0.1))]  # fmt: skip
    for number, run in enumerate(runs):
        _job(sweep, number, run)
    write_summary(sweep)
    assert (
        "| mixer=gla | 0.500 | 0.550 | 0.600 | 0.650 | 0.700 | 0.750 | 0.625 |" in (sweep / "mad_scores.md").read_text()
    )
    browser.get((sweep / "report.html").as_uri())
    (heading,) = [h for h in browser.find_elements(By.TAG_NAME, "h2") if h.text == "MAD scores"]
    table = heading.find_element(By.XPATH, "following-sibling::table[1]")
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in table.find_elements(By.TAG_NAME, "tr")]
    assert rows[1] == ["mixer=gla", "0.500", "0.550", "0.600", "0.650", "0.700", "0.750", "0.625"]
    assert rows[2][0] == "mixer=attention" and rows[2][-1] == "missing: compression, memorization"
    assert table.is_displayed() and browser.execute_script("return document.documentElement.scrollWidth <= innerWidth")
    browser.save_screenshot(str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000
