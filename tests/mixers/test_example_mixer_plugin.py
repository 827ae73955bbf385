"""The example mixer plugin (examples/plugin4, learned_decay): its decay starts at RetNet's rates and is learned;
installed as a user would, it passes the conformance kit's mixer cells against its recurrence and trains from
`mixer=`, with no edit to andrea; with its decay broken, its cells fail by name."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from andrea.mixers.layers import mixer_registry
from andrea.ops.gated_linear import FORMS
from andrea.testing import mixer_checks
from tests.attention.test_conformance_kit import run_kit
from tests.attention.test_example_mechanism_plugin import counts, install, trains_one_epoch

PLUGIN = Path(__file__).parents[2] / "examples" / "plugin4"


@pytest.fixture
def learned_decay(monkeypatch):
    """The plugin's class, imported from its source (no install)."""
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    from andrea_learned_decay.mixer import LearnedDecay

    return LearnedDecay


def test_the_decay_starts_at_retnets_rates_and_is_learned(learned_decay):
    torch.manual_seed(0)
    layer = learned_decay(16, 32, n_head=4)
    g = layer.log_decay(torch.zeros(1, 5, 16))  # (B, H, T)
    torch.testing.assert_close(g[0, :, 0].exp(), 1 - 2.0 ** (-5.0 - torch.arange(4.0)))
    y, _ = layer(torch.randn(2, 9, 16))
    y.square().sum().backward()
    assert layer.w.grad is not None and layer.w.grad.abs().min() > 0  # every head's rate moves


def test_its_forms_agree_with_the_recurrence_it_writes(learned_decay, monkeypatch):
    """The plugin's `reference` (γ_h = sigmoid(w_h), one token at a time) against each of its forms, gradients too,
    across packed documents: the kit's cells, called here without installing it."""
    monkeypatch.setitem(mixer_registry.builtins, "learned_decay", "andrea_learned_decay.mixer:LearnedDecay")
    for form in FORMS:
        assert mixer_checks.parity("learned_decay", form, "document", torch.float32, backward=True) == "passed"


@pytest.mark.slow(reason="installs the plugin, then its kit cells and a training run (~1 min)")
def test_the_plugin_passes_the_kit_and_trains(tmp_path):
    env = install(tmp_path / "site", PLUGIN)
    kit = run_kit(tmp_path, "--andrea-mixers", "learned_decay", env=env)
    assert kit.returncode == 0, kit.stdout[-3000:]
    (failed, passed), (cells, cells_passed, cells_failed, unsupported) = counts(kit.stdout)
    assert failed == cells_failed == unsupported == 0 and cells == cells_passed == 45  # 3 forms x 3 masks x 5
    assert re.search(r"^learned_decay +document +\.{5} +\.{5} +\.{5}$", kit.stdout, re.MULTILINE), kit.stdout[-3000:]
    trains_one_epoch("mixer", "learned_decay", env, tmp_path)


@pytest.mark.slow(reason="installs a copy of the plugin with its decay broken, then its kit cells (~30 s)")
def test_a_decay_read_from_the_calls_length_fails_its_cells_by_name(tmp_path):
    """A bug only a call of one token hides: the plugin's decay divided by the number of tokens in the call. Its
    recurrence, written on its own, keeps the true decay: every parity cell fails against it, and so does decoding
    from a prefilled cache, each named by mixer, form, mask and pass or cache; decoding one token at a time (a
    call of 1) cannot show the bug, and passes."""
    planted = tmp_path / "planted"
    shutil.copytree(PLUGIN, planted, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    source = planted / "src" / "andrea_learned_decay" / "mixer.py"
    text = source.read_text()
    assert text.count(".expand(B, -1, T)\n") == 1
    source.write_text(text.replace(".expand(B, -1, T)\n", ".expand(B, -1, T) / T\n"))
    env = install(tmp_path / "site", planted)
    kit = run_kit(tmp_path, "--andrea-mixers", "learned_decay", "-k", "test_mixer_parity or test_mixer_decode", env=env)
    out = kit.stdout
    assert kit.returncode == 1, out[-3000:]
    assert out.strip().splitlines()[-1].startswith("36 failed, 9 passed")  # 3 forms x 3 masks x (3 passes + 1 cache)
    assert "learned_decay x recurrent x padding x torch.float32 x backward: output differs from the reference's" in out
    assert "learned_decay x chunked x document: decoding from a prefilled cache differs" in out
    for mask in ("causal", "document", "padding"):
        assert re.search(rf"^learned_decay +{mask} +XXX\.X +XXX\.X +XXX\.X$", out, re.MULTILINE), out[-3000:]
