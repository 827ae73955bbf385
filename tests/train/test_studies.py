"""The reproductions (andrea.train.studies): each study's smoke-sized sweep trains through its experiment preset,
and its report gives every claim a verdict, a figure and a section of report.html; the pieces each verdict reads
are checked against their definitions, and a study is refused in one line before anything is built."""

import json
import math

import pytest
import torch
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from andrea.train.studies import STUDIES
from andrea.train.studies.base import VERDICTS, Job
from andrea.train.studies.diff_noise import allocation
from andrea.train.studies.grokking import key_share, spectrum
from andrea.train.studies.report import FINDINGS, verdict_lines, write_study
from andrea.train.studies.zoology import _delta, _state, best_points, point_of
from andrea.utils.run_result import RunResult
from tests.compose import compose_train

QUIET = ["hydra.mode=RUN", "logger=none", "callbacks.model_checkpoint=null", "callbacks.last_checkpoint=null"]
SMOKE = {  # each study's jobs, smoke-sized: the preset's settings with the sizes cut
    "grokking": [["data.p=11", "data.batch_size=36", "trainer.max_epochs=40", "study.every_n_steps=10"]],
    "induction_bump": [
        [f"model.net.n_layer={n}", "data.num_train=256", "data.num_val=64", "trainer.max_epochs=2"] for n in (2, 1)
    ],
    "diff_noise": [
        [f"arm/diff_noise={m}", "data.num_train=256", "data.num_val=64", "trainer.max_steps=4"]
        for m in ("softmax", "diff")
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
            f"data.bos={bos}",
            "data.path=null",
            "data.seq_len=32",
            "trainer.max_steps=10",
            "model.scheduler.warmup_steps=2",
            "trainer.limit_val_batches=2",
        ]
        for bos in ("false", "true")
    ],
    "copying": [
        [f"arm/copying={arm}", "data.num_train=256", "data.num_val=64", "trainer.max_epochs=1", "study.every_n_steps=2"]
        for arm in ("attention", "mamba2_n4")
    ],
    "state_tracking": [
        [
            f"data={task}",
            f"arm/state_tracking={arm}",
            *extra,
            "data.num_train=256",
            "data.batch_size=64",
            "trainer.max_steps=3",
            "model.scheduler.warmup_steps=1",
            "study.every_n_steps=2",
        ]
        for task, arm, extra in [
            ("parity", "deltanet", []),
            ("parity", "deltanet_neg", []),
            ("parity", "attention", []),
            ("word_problem", "deltaproduct_n1", ["model.net.n_layer=1"]),
            ("word_problem", "deltaproduct_n2", ["model.net.n_layer=1"]),
        ]
    ],  # fmt: skip
    "zoology": [
        [
            f"arm/zoology={m}",
            f"model.net.d_model={d}",
            "data.num_train=192",
            "data.num_val=64",
            "trainer.max_steps=3",
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


def test_allocation_reads_the_answer_and_the_other_pairs_as_shares_of_each_row():
    ids = torch.tensor([[5, 9, 6, 8, 0, 6, 0, 5]])  # pairs (5, 9), (6, 8); queries 6 at 5 and 5 at 7
    queries = torch.tensor([[False] * 5 + [True, False, True]])
    weights = torch.zeros(1, 2, 8, 8)
    weights[0, 0, 5, 2:4], weights[0, 0, 7, 0:2] = 0.5, 0.5  # head 0: all on the answer span
    weights[0, 1, 5, :5] = torch.tensor([0.1, 0.1, 0.3, 0.1, -0.2])  # head 1 at 5: signed, 0.6 of it positive
    weights[0, 1, 7] = 1 / 8  # head 1 at 7: spread evenly
    answer, noise = allocation(weights, ids, queries, pairs=2)
    assert answer.tolist() == pytest.approx([1.0, (0.4 / 0.6 + 2 / 8) / 2])  # the filler's -0.2 is neither
    assert noise.tolist() == pytest.approx([0.0, (0.2 / 0.6 + 2 / 8) / 2])
    weights[0, 1, 5, :2] = -0.1  # weight cancelled on the other pair: less noise than none
    assert allocation(weights, ids, queries, pairs=2)[1][1] == pytest.approx((-0.2 / 0.4 + 2 / 8) / 2)


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


def _streamed(bos: bool, first_token: float, window: float, one: float, four: float, exact: float):
    """A completed sinks job whose streamed losses past the context are `window`, `one` and `four` (the first 1
    and 4 kept) and `exact` (nats)."""
    from andrea.train.studies.base import Job
    from andrea.utils.run_result import RunResult

    losses = {"window": window, "first_1": one, "first_4": four, "recomputed": exact}
    curves = {name: [0.0] * 4 + [loss] * 4 for name, loss in losses.items()}
    final = {"context": 4, "curves": curves, "first_token": first_token}
    return Job(RunResult("completed", 0, "run", config={"data": {"bos": bos}}, study={"final": final}))


def test_a_sinks_claim_is_inconclusive_where_what_it_rests_on_failed(tmp_path):
    """Eviction can hurt only where a sink grew; one kept sink token can stand for four only where evicting it hurt."""
    from andrea.train.studies.sinks import Sinks

    flat = [_streamed(False, 0.3, *[1.70] * 4), _streamed(True, 0.4, *[1.70] * 4)]
    sink, evict, token = Sinks().findings(flat, tmp_path / "flat.png")
    assert sink.verdict == "does not hold" and (evict.verdict, token.verdict) == ("inconclusive", "inconclusive")
    assert "judged on a failed precondition ('a model that sees the same first token" in evict.ours
    assert "'evicting the sink token hurts the model trained with it' does not hold" in token.ours
    formed = [_streamed(False, 2.0, 2.5, 1.8, 1.71, 1.70), _streamed(True, 5.0, 2.5, 1.71, 1.71, 1.70)]
    claims = Sinks().findings(formed, tmp_path / "formed.png")
    assert [c.verdict for c in claims] == ["holds"] * 3
    assert f"vanilla: {math.exp(1.8):.2f} and {math.exp(1.71):.2f}" in claims[2].ours  # beside, as the paper's table


def _noise_job(mechanism: str, seed: int, answer: float, noise: float, val_acc: float = 1.0):
    """A completed diff_noise job whose retrieval head (head 0) has these shares."""
    from andrea.train.studies.base import Job
    from andrea.utils.run_result import RunResult

    final = {"answer": [answer, 0.0], "noise": [noise, 0.0], "head": 0}
    config = {"mechanism": {"name": mechanism}, "seed": seed}
    return Job(RunResult("completed", 0, "run", val_acc=val_acc, config=config, study={"final": final}))


def test_diff_noise_judges_a_seed_only_where_both_retrieve_and_there_is_something_to_move(tmp_path):
    from andrea.train.studies.diff_noise import DiffNoise

    def verdicts(*jobs):
        return [c.verdict for c in DiffNoise().findings(list(jobs), tmp_path / "noise.png")]

    moved = [_noise_job("softmax", 0, 0.5, 0.3), _noise_job("diff", 0, 0.8, 0.02)]
    assert verdicts(*moved) == ["holds", "holds"]
    assert verdicts(_noise_job("softmax", 0, 0.8, 0.1), _noise_job("diff", 0, 0.5, 0.3)) == ["does not hold"] * 2
    unsolved = [_noise_job("softmax", 0, 0.5, 0.3, val_acc=0.5), _noise_job("diff", 0, 0.8, 0.02)]
    assert verdicts(*unsolved) == ["inconclusive"] * 2  # a model that does not retrieve has no retrieval head
    nothing = [_noise_job("softmax", 0, 0.97, 0.01), _noise_job("diff", 0, 0.99, 0.0)]
    assert verdicts(*nothing) == ["inconclusive"] * 2  # no room on the answer, no noise to cancel
    mixed = [*moved, _noise_job("softmax", 1, 0.5, 0.3, val_acc=0.5), _noise_job("diff", 1, 0.8, 0.02)]
    claims = DiffNoise().findings(mixed, tmp_path / "noise.png")
    assert [c.verdict for c in claims] == ["holds"] * 2 and "in 1 of 1 judged seeds" in claims[0].ours


def _copy_job(mixer: str, d_state: int | None, learned: list[float], accuracy: dict[int, float], state: int):
    """A completed copying job: string accuracy every 100 steps, at each length once trained (16 trained)."""
    from andrea.train.studies.base import Job
    from andrea.utils.run_result import RunResult

    series = [{"step": 100 * i, "string_acc": acc} for i, acc in enumerate(learned)]
    final = {"trained": 16, "accuracy": {str(n): a for n, a in accuracy.items()}, "state": state}
    final["fixed"] = mixer != "attention"
    config = {"mixer": {"name": mixer, "d_state": d_state}, "model": {"optimizer": {"lr": 0.001}}}
    return Job(RunResult("completed", 0, "run", config=config, study={"series": series, "final": final}))


def test_copying_reads_steps_lengths_and_state_into_its_verdicts(tmp_path):
    from andrea.train.studies.copying import Copying

    attention = _copy_job("attention", None, [0.0, 0.95], {8: 1.0, 16: 1.0, 32: 0.97, 64: 0.6}, 10**5)
    small = _copy_job("mamba2", 4, [0.0, 0.0, 0.0, 0.0, 0.95], {8: 1.0, 16: 0.95, 32: 0.1, 64: 0.0}, 1024)
    large = _copy_job("mamba2", 64, [0.0, 0.0, 0.0, 0.92], {8: 1.0, 16: 0.97, 32: 0.93, 64: 0.2}, 16384)
    fewer, longer, outgrown = Copying().findings([attention, large, small], tmp_path / "copy.png")
    assert (fewer.verdict, longer.verdict, outgrown.verdict) == ("holds", "holds", "holds")
    assert "attention 100; mamba2 (d_state 4) 400; mamba2 (d_state 64) 300" in fewer.ours  # fixed ones by state
    fast = _copy_job("mamba2", 64, [0.0, 0.95], {8: 1.0, 16: 0.97, 32: 0.1, 64: 0.0}, 16384)
    claims = Copying().findings([attention, small, fast], tmp_path / "copy.png")
    assert [c.verdict for c in claims] == ["does not hold", "holds", "does not hold"]  # as fast; no longer copies
    unlearned = _copy_job("mamba2", 64, [0.0, 0.1], {8: 0.3, 16: 0.1, 32: 0.0, 64: 0.0}, 16384)
    claims = Copying().findings([attention, small, unlearned], tmp_path / "copy.png")
    assert claims[2].verdict == "inconclusive" and "fewer than 2 copy the lengths trained on" in claims[2].ours
    never = _copy_job("attention", None, [0.0, 0.5], {8: 0.9, 16: 0.5, 32: 0.0, 64: 0.0}, 10**5)
    claims = Copying().findings([never, small, large], tmp_path / "copy.png")
    assert claims[0].verdict == claims[1].verdict == "inconclusive"  # attention never copied: nothing to compare


def _mqar_job(mixer, width, val, most, state, conv=0):
    """A zoology job's result as the study reads it: one layer of `state` bytes, `conv` of them a convolution's."""
    layers = [{"layer": 0, "kind": mixer, "mixer": mixer, "cache": "state", "bytes": state, "conv_bytes": conv}]
    return Job(RunResult(
        "completed", 0, "run", val_acc=val, eval_sets={"pairs_8": {"acc": most}, "pairs_16": {"acc": most}},
        cache_bytes={"length": 64, "layers": layers},
        config={"mixer": {"name": mixer}, "model": {"net": {"d_model": width}, "optimizer": {"lr": 1e-3}}},
    ))  # fmt: skip


def test_zoology_counts_state_as_zoology_does_and_judges_no_mixer_that_learned_nothing():
    point = point_of(_mqar_job("deltanet", 32, 0.95, 0.4, state=4_096 + 1_536, conv=1_536))
    assert point.state == 4_096  # the short convolution's inputs left out, as Zoology's state_size() leaves them
    learned = [_mqar_job("gla", 32, 0.95, 0.30, 2_048), _mqar_job("gla", 64, 0.97, 0.80, 8_192)]
    assert _state(best_points(learned)).verdict == "holds"  # 16 pairs cost at d 32, and the larger state wins it back
    blank = [_mqar_job("gla", 32, 0.02, 0.01, 2_048), _mqar_job("gla", 64, 0.03, 0.01, 8_192)]
    claim = _state(best_points(blank))
    assert claim.verdict == "inconclusive" and "learned nothing" in claim.ours  # not "holds": nothing happened
    ample = [_mqar_job("deltanet", 32, 1.0, 0.99, 4_096), _mqar_job("deltanet", 64, 1.0, 0.99, 16_384)]
    claim = _state(best_points(ample))
    assert claim.verdict == "inconclusive" and "no limit" in claim.ours  # not "does not hold": no state was short
    unlearned = [_mqar_job("deltanet", 32, 0.3, 0.10, 4_096), *blank]  # 0.10 against 0.01 at 16 pairs
    assert _delta(best_points(unlearned)).verdict == "inconclusive"  # neither learned 4 pairs: no comparison


def _tracking_job(task, mixer, neg, scaled, n=None):
    """A state_tracking job's result as the study reads it: its scaled accuracy at 40, 80, 160 and 256 tokens."""
    mixer_node = {"name": mixer, "allow_neg_eigval": neg} | ({"n_householder": n} if n else {})
    final = {"task": task, "trained": 40, "scaled": dict(zip(["40", "80", "160", "256"], scaled, strict=True))}
    study = {"name": "state_tracking", "series": [{"step": 0, "last_acc": 0.5}], "final": final}
    return Job(RunResult("completed", 0, "run", config={"mixer": mixer_node}, study=study))


def test_state_tracking_judges_each_pair_beyond_the_trained_length(tmp_path):
    from andrea.train.studies.state_tracking import StateTracking

    jobs = [
        _tracking_job("parity", "deltanet", False, [0.3, 0.0, 0.0, 0.0]),
        _tracking_job("parity", "deltanet", True, [1.0, 1.0, 0.98, 0.95]),
        _tracking_job("parity", "attention", None, [1.0, 0.1, 0.0, 0.0]),
        _tracking_job("modular_counting", "deltanet", False, [0.9, 0.2, 0.1, 0.0]),
        _tracking_job("modular_counting", "deltanet", True, [1.0, 0.9, 0.8, 0.7]),  # 0.8 beyond: not solved
        _tracking_job("word_problem", "gated_deltaproduct", True, [0.4, 0.1, 0.0, 0.0], n=1),
        _tracking_job("word_problem", "gated_deltaproduct", True, [1.0, 1.0, 1.0, 0.99], n=2),
    ]
    parity, counting, householder, control = StateTracking().findings(jobs, tmp_path / "tracking.png")
    assert (parity.verdict, counting.verdict, householder.verdict, control.verdict) == (
        "holds", "does not hold", "holds", "holds")  # fmt: skip
    assert "deltanet [-1, 1] 1.00 at the trained length, 0.98 beyond" in parity.ours
    assert (tmp_path / "tracking.png").stat().st_size > 10_000
    unlearned = _tracking_job("parity", "attention", None, [0.2, 0.0, 0.0, 0.0])
    control = StateTracking().findings([*jobs[:2], unlearned], tmp_path / "tracking.png")[3]
    assert control.verdict == "inconclusive" and "does not learn the trained length" in control.ours
    assert StateTracking().findings(jobs[:1], tmp_path / "tracking.png")[0].verdict == "inconclusive"
