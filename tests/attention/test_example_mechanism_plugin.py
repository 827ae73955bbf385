"""The example mechanism plugin (examples/plugin3, sparsemax): its weights and its formula equal a hand
computation; installed as a user would, it passes the conformance kit against its own formula, trains from
`mechanism=` and shows in --help, with no edit to andrea; with a wrong formula planted, its cells fail by name."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from andrea.testing.checks import MECHANISM_SIZES

from .test_conformance_kit import run_kit, user_shell

PLUGIN = Path(__file__).parents[2] / "examples" / "plugin3"


@pytest.fixture
def sparsemax(monkeypatch):
    """The plugin's class, imported from its source (no install)."""
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    from andrea_sparsemax.mechanism import Sparsemax

    return Sparsemax(**MECHANISM_SIZES)


def test_sparsemax_of_a_row_by_hand(sparsemax):
    """z = (1, 0.5, -1): sorted, 1 + k z_(k) > Σ z_(j<=k) holds for k = 1, 2 (2 > 1.5) and not 3 (-2 > 0.5), so
    τ = (1 + 0.5 - 1) / 2 = 0.25 and p = (0.75, 0.25, 0); with the first key masked, (0.5, -1) gives τ = -0.5 and
    p = (0, 1, 0); a row that sees no key is 0."""
    z = torch.tensor([[1.0, 0.5, -1.0]] * 3)  # (3 rows, 3 keys)
    allowed = torch.tensor([[True, True, True], [False, True, True], [False, False, False]])
    expected = torch.tensor([[0.75, 0.25, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(sparsemax.normalise(z, allowed, attends_self=False), expected)
    q = z.double().view(1, 1, 3, 3)
    k = torch.eye(3, dtype=torch.float64).view(1, 1, 3, 3)  # q kᵀ = z, at scale 1
    torch.testing.assert_close(sparsemax.formula(q, k, allowed.view(1, 1, 3, 3), 1.0, None)[0, 0], expected.double())


def install(target: Path, source: Path = PLUGIN) -> dict[str, str]:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         str(source)],
        check=True, timeout=300,
    )  # fmt: skip
    return user_shell(target)


def counts(out: str) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """(pytest's failed, passed), and the parity matrix's (cells, passed, failed, unsupported)."""
    summary = out.strip().splitlines()[-1]
    failed, passed = (int((re.search(rf"(\d+) {word}", summary) or [0, 0])[1]) for word in ("failed", "passed"))
    cells = re.search(r"(\d+) cells: (\d+) passed, (\d+) failed, (\d+) unsupported", out)
    assert cells, out[-2000:]
    return (failed, passed), (int(cells[1]), int(cells[2]), int(cells[3]), int(cells[4]))


@pytest.mark.slow(reason="installs the plugin, then its kit cells and a training run (~2 min)")
def test_the_sparsemax_plugin_passes_the_kit_against_its_formula_and_trains(tmp_path):
    env = install(tmp_path / "site")
    cell_tests = "(test_mechanism_parity or test_position_and_mechanism) and not triton"  # every one a cell
    kit = run_kit(tmp_path, "--andrea-mechanisms", "sparsemax", "-k", cell_tests, env=env)
    assert kit.returncode == 0, kit.stdout[-3000:]
    (failed, passed), (cells, cells_passed, cells_failed, unsupported) = counts(kit.stdout)
    assert failed == cells_failed == 0 and cells_passed + unsupported == cells == passed > 200  # pytest's count
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in kit.stdout.splitlines()
            if "~sparsemax" in line and "@" not in line}  # fmt: skip
    every = ["...", ".."] * 3  # mha, gqa, mqa: float32 fwd, bwd, bfloat16 fwd; float32 fwd, bwd with ALiBi
    assert rows[("eager", "causal", "~sparsemax")] == rows[("naive", "window|document", "~sparsemax")] == every
    assert rows[("naive", "strided_3", "~sparsemax")] == every  # a plugin's mask meets it
    assert re.search(r"^eager +causal ~sparsemax @rope +\.", kit.stdout, re.MULTILINE)  # RoPE and ALiBi in a block
    assert rows[("sdpa", "causal", "~sparsemax")][0].isdigit()  # refused, the reason listed
    train = str(Path(sys.executable).with_name("andrea-train"))
    help_text = subprocess.run([train, "--help"], env=env, cwd=tmp_path, capture_output=True, text=True).stdout
    (mechanism_line,) = [line for line in help_text.splitlines() if line.startswith("mechanism: ")]
    assert "sparsemax" in mechanism_line.split(", ")
    trains_one_epoch("mechanism", "sparsemax", env, tmp_path)


def trains_one_epoch(group: str, name: str, env: dict[str, str], folder: Path) -> None:
    """`andrea-train <group>=<name>` in a user's shell `env` trains one short epoch, its config naming `name`."""
    train = str(Path(sys.executable).with_name("andrea-train"))
    done = subprocess.run([train, f"{group}={name}", "logger=csv", "trainer.max_epochs=1", "data.num_train=256",
                           "data.num_val=64"], env=env, cwd=folder, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = folder.glob("logs/train/runs/*")
    assert f"name: {name}" in (run_dir / ".hydra" / "config.yaml").read_text()


@pytest.mark.slow(reason="installs a copy of the plugin with a wrong formula, then its kit cells (~1 min)")
def test_a_wrong_formula_planted_in_the_plugin_fails_its_cells_by_name(tmp_path):
    """The kit trusts no backend's weights, the plugin's own included: with τ off by 0.1 in its formula, every
    cell of the mechanism fails, each named, and the count line equals pytest's."""
    planted = tmp_path / "planted"
    shutil.copytree(PLUGIN, planted, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    source = planted / "src" / "andrea_sparsemax" / "mechanism.py"
    text = source.read_text()
    assert text.count("- 1) / size\n") == 1
    source.write_text(text.replace("- 1) / size\n", "- 0.9) / size\n"))
    env = install(tmp_path / "site", planted)
    selection = ["--andrea-mechanisms", "sparsemax", "--andrea-backends", "eager,naive", "-k", "test_mechanism_parity"]
    kit = run_kit(tmp_path, *selection, "-rN", env=env)  # every test a cell, each against the formula
    assert kit.returncode == 1, kit.stdout[-3000:]
    (failed, passed), (cells, cells_passed, cells_failed, unsupported) = counts(kit.stdout)
    assert cells_failed == failed == cells and passed == cells_passed == unsupported == 0
    assert "eager ~sparsemax x causal x gqa x torch.float32 x forward: " in kit.stdout  # named, with why
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in kit.stdout.splitlines() if "~sparsemax" in line}
    assert rows[("naive", "causal", "~sparsemax")] == ["XXX", "XX"] * 3  # every variant of every head config
