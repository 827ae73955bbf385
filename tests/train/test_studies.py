"""The reproductions (andrea.train.studies): each study's smoke-sized sweep trains through its experiment preset,
and its report gives every claim a verdict, a figure and a section of report.html; the pieces each verdict reads
are checked against their definitions, and a study is refused in one line before anything is built."""

import json

import pytest
import torch
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from andrea.train.studies import STUDIES
from andrea.train.studies.base import VERDICTS
from andrea.train.studies.diff_noise import answer_mass
from andrea.train.studies.grokking import key_share, spectrum
from andrea.train.studies.report import FINDINGS, verdict_lines, write_study
from tests.compose import compose_train

QUIET = ["hydra.mode=RUN", "logger=none", "callbacks.model_checkpoint=null", "callbacks.last_checkpoint=null"]
SMOKE = {  # each study's jobs, smoke-sized: the preset's settings with the sizes cut
    "grokking": [["data.p=11", "data.batch_size=36", "trainer.max_epochs=40", "study.every_n_steps=10"]],
    "induction_bump": [
        [f"model.net.n_layer={n}", "data.num_train=256", "data.num_val=64", "trainer.max_epochs=2"] for n in (2, 1)
    ],
    "diff_noise": [
        [f"mechanism={m}", "data.num_train=256", "data.num_val=64", "trainer.max_epochs=1"] for m in ("softmax", "diff")
    ],
    "lr_sensitivity": [
        [
            f"mechanism={m}",
            f"model.optimizer.lr={lr}",
            "data.path=null",
            "trainer.max_steps=20",
            "model.scheduler.warmup_steps=5",
            "study.every_n_steps=10",
        ]
        for m in ("softmax", "qknorm")
        for lr in (1e-3, 1e-1)
    ],  # fmt: skip
    "sinks": [
        [
            f"mechanism={m}",
            "data.path=null",
            "data.seq_len=32",
            "trainer.max_steps=10",
            "model.scheduler.warmup_steps=2",
            "trainer.limit_val_batches=2",
        ]
        for m in ("softmax", "sink")
    ],
    "zoology": [
        [
            f"model.net.layout=[{m}]",
            f"model.net.d_model={d}",
            "data.num_train=128",
            "data.num_val=64",
            "trainer.max_epochs=1",
        ]
        for m in ("attention", "gla", "deltanet")
        for d in (16, 32)
    ],  # fmt: skip
}


def run_study(name, sweep_dir, jobs):
    results = []
    for number, overrides in enumerate(jobs):
        results.append(train(compose_train(sweep_dir / str(number), [f"experiment={name}", *overrides, *QUIET])))
        HydraConfig.instance().cfg = None
    assert all(r.status == "completed" and r.study and r.study["name"] == name for r in results)
    settings = {"name": name, **({"every_n_steps": 10} if name == "grokking" else {})}
    section = write_study(sweep_dir, settings, results)
    return results, section, json.loads((sweep_dir / FINDINGS).read_text())


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "grokking" else [pytest.mark.slow]) for n in SMOKE])
def test_a_smoke_sized_study_gives_every_claim_a_verdict_and_a_figure(name, tmp_path):
    results, section, found = run_study(name, tmp_path, SMOKE[name])
    assert found["study"] == name and found["jobs"] == len(results) and len(found["claims"]) >= 2
    assert all(c["verdict"] in VERDICTS and c["paper"] and c["ours"] for c in found["claims"])
    assert (tmp_path / found["figure"]).stat().st_size > 10_000  # a drawn figure, not an empty canvas
    assert "<h2>Reproduction:" in section and section.count('<td class="verdict">') == len(found["claims"])
    lines = verdict_lines(tmp_path)
    assert lines[0].startswith(STUDIES[name].title) and len(lines) == 1 + len(found["claims"])


def test_a_study_records_at_its_cadence_and_keeps_its_final_numbers(tmp_path):
    (result,), _, _ = run_study("grokking", tmp_path, SMOKE["grokking"])
    steps = [row["step"] for row in result.study["series"]]
    assert steps == [0, 10, 20, 30, 40]  # at init, every 10 steps, and the end (40: recorded once)
    assert all(0 <= row["train_acc"] <= 1 and 0 <= row["test_acc"] <= 1 for row in result.study["series"])
    assert len(result.study["final"]["spectrum"]) == 11 // 2 and result.study["final"]["p"] == 11


def test_a_missing_job_makes_its_claims_inconclusive(tmp_path):
    for study in STUDIES:
        write_study(tmp_path, {"name": study}, [])
        claims = json.loads((tmp_path / FINDINGS).read_text())["claims"]
        assert claims and all(c["verdict"] == "inconclusive" for c in claims), study


def test_a_pure_fourier_embedding_puts_all_its_energy_in_its_frequencies():
    p, t = 13, torch.arange(13).unsqueeze(1).float()
    embedding = torch.cat(
        [torch.cos(2 * torch.pi * k * t / p) for k in (2, 5)] + [torch.sin(2 * torch.pi * 5 * t / p)], 1
    )
    shares = spectrum(embedding, p)
    assert shares.argsort(descending=True)[:2].add(1).sort().values.tolist() == [2, 5]
    assert key_share(shares) == pytest.approx(1.0) and shares.sum() == pytest.approx(1.0)
    assert key_share(spectrum(torch.randn(200, 64), 199)) < 0.3  # noise: no key frequency


def test_answer_mass_reads_the_key_and_its_value_at_each_query():
    ids = torch.tensor([[5, 9, 6, 8, 0, 6, 0, 5]])  # pairs (5, 9), (6, 8); queries 6 at 5 and 5 at 7
    queries = torch.tensor([[False] * 5 + [True, False, True]])
    weights = torch.zeros(1, 2, 8, 8)
    weights[0, 0, 5, 2:4], weights[0, 0, 7, 0:2] = 0.5, 0.5  # head 0: all on the answer span
    weights[0, 1, 5, :6], weights[0, 1, 7, :8] = -1 / 6, 1 / 8  # head 1: spread, negative at one query
    answer, rest = answer_mass(weights, ids, queries)
    assert answer.tolist() == pytest.approx([1.0, (-2 / 6 + 2 / 8) / 2])
    assert rest.tolist() == pytest.approx([0.0, (4 / 6 + 6 / 8) / 2])


@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        (["experiment=grokking", "study.name=grok"], "study.name='grok' is not a study: use one of"),
        (["experiment=grokking", "+study.every=5"], "study.every is not a setting of study"),
        (
            ["experiment=grokking", "data=induction"],
            "study.name=grokking reads the modular_addition task; drop data=induction",
        ),
        (["experiment=grokking", "study.every_n_steps=-1"], "study.every_n_steps=-1"),
    ],
)
def test_a_bad_study_is_refused_in_one_line_before_anything_is_built(overrides, refusal, tmp_path):
    from andrea.train.config import ConfigError, validate

    with pytest.raises(ConfigError) as refused:
        validate(compose_train(tmp_path, [*overrides, "hydra.mode=RUN"]))
    HydraConfig.instance().cfg = None
    assert refusal in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.slow  # reason: a 2-job sweep through andrea-train, then a browser
def test_the_command_prints_its_verdicts_and_the_report_shows_them_first(tmp_path, browser):
    import subprocess
    import sys
    from pathlib import Path

    from selenium.webdriver.common.by import By

    from tests.compose import plain_env

    script = str(Path(sys.executable).with_name("andrea-train"))
    sweep = tmp_path / "sweep"
    args = ["experiment=induction_bump", "seed=0", "data.num_train=256", "data.num_val=64", "trainer.max_epochs=2"]
    done = subprocess.run(
        [script, *args, "logger=none", f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, cwd=tmp_path, env=plain_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout.splitlines()
    title = printed.index("The induction bump (Olsson et al. 2022), 2 jobs:")
    assert all(line.startswith(("  HOLDS: ", "  DOES NOT HOLD: ", "  INCONCLUSIVE: ")) for line in printed[title + 1 :])
    browser.get((sweep / "report.html").as_uri())
    first = browser.find_element(By.TAG_NAME, "h2")
    assert first.text == "Reproduction: The induction bump (Olsson et al. 2022)"  # above the jobs' tables
    verdicts = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.claims td.verdict")]
    assert len(verdicts) == 2 and set(verdicts) <= set(VERDICTS)
    figure = browser.find_element(By.CSS_SELECTOR, "img[alt='The induction bump (Olsson et al. 2022)']")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", figure) > 1000
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")  # fits
    browser.save_screenshot(str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000


def _streamed(mechanism: str, first_token: float, window: float, kept: float, exact: float):
    """A completed sinks job whose streamed losses past the context are `window`, `kept` and `exact` (nats)."""
    from andrea.train.studies.base import Job
    from andrea.utils.run_result import RunResult

    curves = {name: [0.0] * 4 + [loss] * 4 for name, loss in (("window", window), ("first_4", kept),
                                                             ("recomputed", exact))}  # fmt: skip
    final = {"context": 4, "curves": curves, "first_token": first_token}
    return Job(RunResult("completed", 0, "run", config={"mechanism": {"name": mechanism}}, study={"final": final}))


def test_a_sinks_claim_is_inconclusive_where_what_it_rests_on_failed(tmp_path):
    """Eviction can hurt only where a sink grew; a sink logit can take the hurt away only where eviction hurt."""
    from andrea.train.studies.sinks import Sinks

    flat = [_streamed("softmax", 0.3, 1.70, 1.70, 1.70), _streamed("sink", 0.4, 1.70, 1.70, 1.70)]
    sink, evict, logit = Sinks().findings(flat, tmp_path / "flat.png")
    assert sink.verdict == "does not hold" and (evict.verdict, logit.verdict) == ("inconclusive", "inconclusive")
    assert "judged on a failed precondition ('the model grows an attention sink" in evict.ours
    assert "evicting the first tokens hurts the softmax model' does not hold" in logit.ours
    formed = [_streamed("softmax", 5.0, 2.5, 1.71, 1.70), _streamed("sink", 0.4, 1.70, 1.70, 1.70)]
    assert [c.verdict for c in Sinks().findings(formed, tmp_path / "formed.png")] == ["holds"] * 3
