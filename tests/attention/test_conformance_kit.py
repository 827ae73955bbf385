"""The kit catches a wrong plugin: a backend off by its scale, a mask that lies about its flags,
a backend that refuses what it declares it can do. Each failure names its cell."""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from andrea.attention import Capabilities, Causal, KeyPadding, SlidingWindow, get_backend
from andrea.attention.backends.eager import EagerBackend
from andrea.attention.mechanisms import Diff, Mechanism, Sigmoid
from andrea.testing import checks, declared

from .helpers import files_plugin


def user_shell(site: Path | None = None) -> dict[str, str]:
    """A user's shell (without TRITON_INTERPRET, which some tests set), with `site`'s plugins importable."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def run_kit(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """What a plugin author runs, from `folder`: `pytest --pyargs andrea.testing` with `args`."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "andrea.testing", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder, capture_output=True, text=True, timeout=timeout, env=env or user_shell(),
    )  # fmt: skip


class OffByScale(EagerBackend):
    name = "off_by_scale"

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None, mechanism=None, **kwargs):
        return super().forward(
            q, k, v, mask=mask, scale=scale * 1.1, need_weights=need_weights, score_mod=score_mod, mechanism=mechanism
        )


class RefusesPadding(EagerBackend):
    name = "refuses_padding"  # declares every mask kind, yet refuses padding
    capabilities = Capabilities(score_mod=True)

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None, mechanism=None, **kwargs):
        if mask is not None and "padding" in mask.kinds:
            from andrea.attention import UnsupportedAttentionError

            raise UnsupportedAttentionError("no padding here")
        return super().forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights, score_mod=score_mod)


@dataclass(frozen=True, repr=False)
class FalselyCausal(SlidingWindow):
    kind: ClassVar[str] = "falsely_causal"
    is_causal: ClassVar[bool] = True  # a window is not the causal mask: SDPA's fast path would ignore it


@dataclass(frozen=True, repr=False)
class ShortSighted(SlidingWindow):
    kind: ClassVar[str] = "short_sighted"

    @property
    def max_lookback(self) -> int | None:  # type: ignore[override]
        return self.window - 1  # one too few: a KV cache would drop a key the mask still sees


def test_a_backend_off_by_its_scale_fails_naming_the_cell():
    with pytest.raises(AssertionError, match=r"off_by_scale x causal x gqa x torch.float32 x forward: output differs"):
        checks.parity(OffByScale(), Causal(), "gqa")
    with pytest.raises(AssertionError, match=r"off_by_scale x causal x mha x decode \(T=3, S=9\): output differs"):
        checks.decode(OffByScale(), Causal(), "mha")


def test_a_mask_with_a_false_flag_fails_naming_the_flag():
    with pytest.raises(
        AssertionError, match="mask sliding_window_3: declares is_causal, but its predicate is not causal"
    ):
        declared.mask_flags(FalselyCausal(3))
    with pytest.raises(AssertionError, match="mask sliding_window_3: declares max_lookback=2, but sees further back"):
        declared.mask_flags(ShortSighted(3))
    declared.mask_flags(SlidingWindow(3))  # the true one passes


def test_a_refusal_the_capabilities_do_not_declare_fails():
    padding = KeyPadding(torch.tensor([5, 0]))
    with pytest.raises(
        AssertionError, match="refuses_padding x padding x mha x .*: refused although its capabilities accept it"
    ):
        checks.parity(RefusesPadding(), padding, "mha")
    with pytest.raises(AssertionError, match="refuses_padding x padding: refused a mask its capabilities accept"):
        declared.capabilities(RefusesPadding(), [padding])


@pytest.mark.slow(reason="a pytest session of its own (~11 s); the default run's failing-plugin test runs the kit too")
def test_the_kit_runs_from_the_installed_package(tmp_path):
    """What a plugin author runs: `pytest --pyargs andrea.testing` (here a slice of it, from another folder),
    ending with the parity matrix: a row per backend and mask, a character per cell."""

    done = run_kit(
        tmp_path, "-k", "test_mask_flags or test_empty_rows_and_capabilities or (test_parity and -causal-mha-)"
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
    report = done.stdout[done.stdout.index("attention parity matrix") :].splitlines()
    assert report[1].split() == ["backend", "mask", "mha"]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in report[2:] if line.startswith(("naive ", "eager "))}
    assert rows[("eager", "causal")] == ["......"]  # float32 and bfloat16, forward and backward, +alibi
    assert any(line.startswith("[1] unsupported") for line in report)  # flex's backward on CPU, declared
    assert any("attention backend 'triton' runs on CUDA GPUs" in line for line in report)  # listed, with the reason


OFF_BY_SCALE = """
from andrea.attention.backends.eager import EagerBackend
from andrea.attention.mechanisms import Sigmoid

class OffByScale(EagerBackend):
    name = "off_by_scale"

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None):
        return super().forward(q, k, v, mask=mask, scale=scale * 1.1, need_weights=need_weights, score_mod=score_mod)
"""


@pytest.mark.slow(reason="runs the kit in a second pytest with a failing plugin installed (~13 s)")
def test_a_failing_plugin_s_cells_are_drawn_x_and_counted_as_pytest_counts_them(tmp_path):
    """The kit narrowed to one plugin (--andrea-backends) draws each failed cell X, and its count line equals
    pytest's own counts; a plugin entry point that cannot be imported fails one test naming it."""

    site = tmp_path / "site"
    files_plugin(site, "off_by_scale_plugin", [
        ("andrea.attention_backends", "off_by_scale", "off_by_scale_plugin:OffByScale"),
        ("andrea.attention_masks", "missing_mask", "no_such_module:Missing"),
    ], {"off_by_scale_plugin": OFF_BY_SCALE})  # fmt: skip
    env = user_shell(site)
    selection = "test_parity or test_plugin_entry_points"
    done = run_kit(tmp_path, "--andrea-backends", "off_by_scale", "-k", selection, "-rN", env=env)
    assert done.returncode == 1, done.stdout[-3000:]
    out = done.stdout
    assert "plugin entry point 'missing_mask = no_such_module:Missing' (group 'andrea.attention_masks') " in out
    assert "cannot be loaded: ModuleNotFoundError: No module named 'no_such_module'" in out
    summary = out.strip().splitlines()[-1]
    failed, passed = (int((re.search(rf"(\d+) {word}", summary) or [0, 0])[1]) for word in ("failed", "passed"))
    cells = re.search(r"(\d+) cells: (\d+) passed, (\d+) failed, (\d+) unsupported", out)
    assert cells, out[-2000:]
    total, cells_passed, cells_failed, unsupported = map(int, cells.groups())
    assert cells_failed == failed - 1 > 0  # every parity test that failed, less the entry-point test
    assert cells_passed + unsupported == passed and total == passed + failed - 1
    rows = {line.split()[1]: line.split()[2:] for line in out.splitlines() if line.startswith("off_by_scale ")}
    assert rows["causal"] == rows["none"] == ["XXXXXX"] * 3  # every variant of every head config: failed
    train = subprocess.run(
        [str(Path(sys.executable).with_name("andrea-train")), "--help"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert train.returncode == 0 and "== Config groups ==" in train.stdout
    assert train.stderr.strip().splitlines() == [
        "andrea-train: warning: plugin entry point 'missing_mask = no_such_module:Missing' (group "
        "'andrea.attention_masks') cannot be loaded: ModuleNotFoundError: No module named 'no_such_module'"
    ]


class SigmoidWithoutBias(EagerBackend):
    """Declares the sigmoid kernel, and forgets the bias b in it."""

    name = "sigmoid_without_bias"
    capabilities = Capabilities(score_mod=True, kernels=frozenset({"softmax", "sigmoid"}))

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None, mechanism=None, **kwargs):
        if isinstance(mechanism, Sigmoid):
            weights = torch.sigmoid(q @ k.transpose(-2, -1) * scale) * mask.dense(q.shape[2], k.shape[2])
            return weights @ v, weights if need_weights else None
        return super().forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights, score_mod=score_mod)


def test_a_wrong_mechanism_kernel_fails_naming_the_cell():
    (sigmoid,) = checks.mechanism_examples("sigmoid")
    cell = r"sigmoid_without_bias ~sigmoid x causal x mha x torch.float32 x forward: output differs"
    with pytest.raises(AssertionError, match=cell):
        checks.parity(SigmoidWithoutBias(), Causal(), "mha", mechanism=sigmoid)
    assert checks.parity(EagerBackend(), Causal(), "mha", mechanism=sigmoid) == "passed"  # the right one
    refused = checks.parity(SigmoidWithoutBias(), Causal(), "mha", mechanism=checks.mechanism_examples("diff")[0])
    assert refused.startswith("unsupported: attention backend 'sigmoid_without_bias' does not run mechanism 'diff'")


class OffByABias(Sigmoid):
    """sigmoid with a bug planted in the weights both eager and naive run (its formula is sigmoid's own)."""

    def normalise(self, scores, allowed, attends_self, head=None):
        return super().normalise(scores + 0.1, allowed, attends_self, head)


def test_a_mechanism_whose_weights_are_wrong_fails_against_its_formula_on_every_backend():
    """eager and naive both run the mechanism's own weights, so comparing them proves nothing: every backend
    is compared with the mechanism's formula instead, and a planted bug fails its cells by name."""
    planted = OffByABias(**checks.MECHANISM_SIZES)
    for backend in (EagerBackend(), get_backend("naive")):
        with pytest.raises(AssertionError, match=rf"^{backend.name} ~sigmoid x causal x gqa x torch.float32 x "
                                                 "forward: output differs from the formula's"):  # fmt: skip
            checks.parity(backend, Causal(), "gqa", mechanism=planted)
        with pytest.raises(AssertionError, match="weights differ from the formula's"):
            checks.weights(backend, Causal(), "gqa", planted)
    assert checks.parity(EagerBackend(), Causal(), "gqa", mechanism=Sigmoid(**checks.MECHANISM_SIZES)) == "passed"


class Unsigned(Diff):
    signed = False  # its formula subtracts a map: negative weights


class SumsToOne(Sigmoid):
    rows_sum_to_one = True  # a sigmoid row does not


class NoFormula(Mechanism):
    name = "no_formula"
    kernel = "no_formula"

    def normalise(self, scores, allowed, attends_self, head=None):
        return torch.softmax(scores.masked_fill(~allowed, -1e9) if allowed is not None else scores, dim=-1)


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        (Unsigned, "diff gives a negative weight but does not declare signed"),
        (SumsToOne, "sigmoid declares rows_sum_to_one, but a row is off by"),
        (NoFormula, "mechanism 'no_formula' .* has no formula\\(\\): the conformance kit has no math of its own"),
    ],
)
def test_what_a_mechanism_declares_and_lacks_fails_its_cells(mechanism, message):
    with pytest.raises(AssertionError, match=rf"^eager ~\w+ x causal x mha x torch.float32 x forward: {message}"):
        checks.parity(EagerBackend(), Causal(), "mha", mechanism=mechanism(**checks.MECHANISM_SIZES))


RELU = '''
import torch
from andrea.attention.mechanisms import Mechanism


class ReluAttention(Mechanism):
    """ReLU attention: A = relu(s) / n, n the layer's context (a mechanism a plugin brings, with its formula)."""

    name = "relu"
    kernel = "relu"
    rows_sum_to_one = False
    weights_meaning = "relu(scores) / max_context"

    def normalise(self, scores, allowed, attends_self, head=None):
        weights = torch.relu(scores) / self.max_context
        return weights if allowed is None else weights.masked_fill(~allowed, 0.0)

    def formula(self, q, k, allowed, scale, bias):
        s = q @ k.transpose(-2, -1) * scale + (0.0 if bias is None else bias)
        return torch.where(allowed & (s > 0), s / self.max_context, 0.0)
'''


@pytest.mark.slow(reason="runs the kit in a second pytest with a plugin mechanism installed (~15 s)")
def test_a_plugin_mechanism_joins_the_grid_unedited(tmp_path):
    """A package declaring a mechanism under `andrea.attention_mechanisms` gets cells for every backend: those
    that run any mechanism (eager, naive) are proven against its formula, the others refuse, declared."""

    site = tmp_path / "site"
    files_plugin(site, "relu_plugin", [("andrea.attention_mechanisms", "relu", "relu_plugin:ReluAttention")],
                 {"relu_plugin": RELU})  # fmt: skip
    done = run_kit(tmp_path, "-k", "test_mechanism and relu and (eager or naive or sdpa)", env=user_shell(site))
    assert done.returncode == 0, done.stdout[-3000:]
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in done.stdout.splitlines()
            if "~relu" in line and "@" not in line}  # fmt: skip
    every = ["...", ".."] * 3  # mha, gqa, mqa: float32 fwd/bwd, bfloat16 fwd; float32 fwd/bwd with ALiBi
    assert rows[("eager", "causal", "~relu")] == every
    assert rows[("naive", "window|document", "~relu")] == every
    assert rows[("sdpa", "causal", "~relu")][0].isdigit()  # refused, with its reason listed
    assert re.search(r"unsupported: attention backend 'sdpa' does not run mechanism 'relu'", done.stdout)


EXPLODING = """
from andrea.attention.mechanisms import Softmax


class Exploding(Softmax):
    name = "exploding"

    def __init__(self, **sizes):
        super().__init__(**sizes)
        raise RuntimeError("the plugin's constructor fails")
"""


@pytest.mark.slow(reason="the kit, a slice of andrea's suite and andrea-train, each with broken plugins (~40 s)")
def test_a_broken_plugin_breaks_only_itself(tmp_path):
    """A mechanism whose constructor raises, and a config package with a YAML file that is not YAML: the kit
    collects, fails that mechanism's one test in one line and runs every other cell; andrea's own suite stays
    green; andrea-train --help names both with the reason, and choosing either is refused in one line."""
    site = tmp_path / "site"
    entry_points = [("andrea.attention_mechanisms", "exploding", "broken_plug:Exploding"),
                    ("andrea.conf", "broken_plug", "broken_conf")]  # fmt: skip
    files_plugin(site, "broken_plug", entry_points, {"broken_plug": EXPLODING})
    (site / "broken_conf" / "mechanism").mkdir(parents=True)
    (site / "broken_conf" / "__init__.py").write_text("")
    (site / "broken_conf" / "mechanism" / "garbled.yaml").write_text("name: [unclosed\n  bad: : yaml\n")
    env = user_shell(site)
    kit = run_kit(tmp_path, "-k", "test_mechanisms_build or (test_position_and_mechanism and eager)", env=env)
    assert kit.returncode == 1, kit.stdout[-3000:]
    assert "FAILED" in kit.stdout and "test_mechanisms_build[exploding]" in kit.stdout
    assert "'exploding = broken_plug:Exploding' (group 'andrea.attention_mechanisms') cannot be built: RuntimeError: " \
        "the plugin's constructor fails" in kit.stdout  # fmt: skip
    summary = kit.stdout.strip().splitlines()[-1]
    assert summary.startswith("1 failed, ") and " passed" in summary  # the other cells ran
    ours = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/attention/test_parity.py", "-k",
         "test_position_and_mechanism and eager"], cwd=Path(__file__).parents[2], capture_output=True, text=True,
        env=env, timeout=600,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stdout[-3000:]
    train = str(Path(sys.executable).with_name("andrea-train"))
    help_text = subprocess.run([train, "--help"], capture_output=True, text=True, env=env, cwd=tmp_path).stderr
    assert "warning: plugin entry point 'exploding = broken_plug:Exploding'" in help_text
    assert "warning: plugin config 'mechanism/garbled' of package broken_plug cannot be read: " in help_text
    for choice, reason in (
        ("exploding", "cannot be built: RuntimeError"),
        ("garbled", "cannot be read: while parsing"),
    ):
        done = subprocess.run([train, f"mechanism={choice}"], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
        assert done.stderr.startswith("andrea-train: error: ") and reason in done.stderr
