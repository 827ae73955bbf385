"""The example mixer plugin (examples/plugin4, learned_decay): its decay starts at RetNet's rates and is learned;
installed as a user would, it passes the conformance kit's mixer cells against its recurrence and trains from
`mixer=`, with no edit to andrea; with its recurrence broken, its cells fail by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

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


@pytest.mark.slow(reason="installs the plugin, then its kit cells and a training run (~1 min)")
def test_the_plugin_passes_the_kit_and_trains(tmp_path):
    env = install(tmp_path / "site", PLUGIN)
    kit = run_kit(tmp_path, "--andrea-mixers", "learned_decay", env=env)
    assert kit.returncode == 0, kit.stdout[-3000:]
    (failed, passed), (cells, cells_passed, cells_failed, unsupported) = counts(kit.stdout)
    assert failed == cells_failed == unsupported == 0 and cells == cells_passed == 27  # 3 forms x 3 masks x 3
    assert "learned_decay/recurrent document  ..." in kit.stdout
    trains_one_epoch("mixer", "learned_decay", env, tmp_path)


@pytest.mark.slow(reason="installs a copy of the plugin with its decay broken, then its kit cells (~30 s)")
def test_a_decay_read_from_the_calls_length_fails_the_decode_cells_by_name(tmp_path):
    """A bug the forms cannot show and generation does: the plugin's decay divided by the number of tokens in the
    call. Every decode cell fails, named by mixer, form, mask and cache."""
    planted = tmp_path / "planted"
    shutil.copytree(PLUGIN, planted, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    source = planted / "src" / "andrea_learned_decay" / "mixer.py"
    text = source.read_text()
    assert text.count(".expand(B, -1, T)\n") == 1
    source.write_text(text.replace(".expand(B, -1, T)\n", ".expand(B, -1, T) / T\n"))
    env = install(tmp_path / "site", planted)
    kit = run_kit(tmp_path, "--andrea-mixers", "learned_decay", "-k", "test_mixer_decode", env=env)
    assert kit.returncode == 1, kit.stdout[-3000:]
    assert kit.stdout.strip().splitlines()[-1].startswith("18 failed")  # 3 forms x 3 masks x 2 starts
    assert "learned_decay x chunked x document: decoding from a prefilled cache differs" in kit.stdout
