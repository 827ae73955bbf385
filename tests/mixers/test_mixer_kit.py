"""The kit's mixer cells prove every form against a recurrence the mixer writes on its own (`reference`), one token
at a time: a plugin mixer whose decay reads the next token fails its parity cells by name, because its forms read
the future and its recurrence cannot; the same decay read by the recurrence too (as a reference built from the
forms' own parts would) fails them all the same; a mixer with no recurrence of its own fails, saying so; and the
kit run from a shell draws every failed cell X in the token mixer matrix, printed once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from andrea.mixers.deltanet import DeltaNet, GatedDeltaNet
from andrea.mixers.deltaproduct import GatedDeltaProduct
from andrea.mixers.gla import GLA
from andrea.mixers.kda import KDA
from andrea.mixers.layers import mixer_registry
from andrea.mixers.linear import LinearAttention
from andrea.mixers.mamba2 import Mamba2
from andrea.mixers.retention import Retention
from andrea.mixers.rwkv7 import RWKV7
from andrea.ops.gated_linear import FORMS
from andrea.testing import mixer_checks
from tests.attention.helpers import files_plugin
from tests.attention.test_conformance_kit import run_kit, user_shell

PEEKING = '''
import torch
import torch.nn.functional as F
from torch import nn

from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import recurrence


class Causal(LinearMixer):
    """A decay per head from each token: log α_t = logsigmoid(W_a x_t), and its recurrence as the paper writes it."""

    name = "causal_decay"

    def __init__(self, d_model, max_context, layer=0, n_layer=1, dropout=0.0, bias=False, *, n_head=4,
                 form="chunked", chunk=64):
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, form=form, chunk=chunk)
        self.a = nn.Linear(d_model, n_head)

    def log_decay(self, x):
        return F.logsigmoid(self.a(self.decay_input(x))).transpose(1, 2)  # (B, H, T)

    def decay_input(self, x):
        return x

    def reference(self, x, mask=None):
        return recurrence(self, x, mask, lambda token, q, k: (q, k, torch.sigmoid(self.a(token.x)).unsqueeze(-1)))


class Peeking(Causal):
    """The bug: each token's decay reads the next token's input too."""

    name = "peeking"

    def decay_input(self, x):
        return x + torch.cat((x[:, 1:], torch.zeros_like(x[:, :1])), dim=1)


class PeekingTwice(Peeking):
    """The same bug, read by its recurrence too: the reference the kit used to build from the forms' own parts."""

    name = "peeking_twice"

    def reference(self, x, mask=None):
        alpha = self.log_decay(x).exp().unsqueeze(-1)  # (B, H, T, 1): the whole sequence's, the next token's included
        return recurrence(self, x, mask, lambda token, q, k: (q, k, alpha[:, :, token.t]))


class Unproven(LinearMixer):
    """Linear attention that writes no recurrence of its own."""

    name = "unproven"
'''
MIXERS = {"causal_decay": "Causal", "peeking": "Peeking", "peeking_twice": "PeekingTwice", "unproven": "Unproven"}


def install(site: Path) -> None:
    """The mixers above as a plugin package: a module and its entry points (group `andrea.mixers`)."""
    entry_points = [("andrea.mixers", name, f"peeking_plugin:{cls}") for name, cls in MIXERS.items()]
    files_plugin(site, "peeking_plugin", entry_points, {"peeking_plugin": PEEKING})


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin's mixers in the registry, where its entry points would put them."""
    install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name, cls in MIXERS.items():
        monkeypatch.setitem(mixer_registry.builtins, name, f"peeking_plugin:{cls}")


@pytest.mark.parametrize("mask_name", mixer_checks.MASKS)
@pytest.mark.parametrize("form", FORMS)
def test_a_decay_that_reads_the_next_token_fails_each_parity_cell_against_the_recurrence(plugin, form, mask_name):
    """The forms read log_decay over the whole sequence, which peeks; the recurrence reads one token at a time, which
    cannot. Without the peek, the same mixer passes the same cell."""
    cell = rf"^peeking x {form} x {mask_name} x torch.float32 x forward: output differs from the reference's"
    with pytest.raises(AssertionError, match=cell):
        mixer_checks.parity("peeking", form, mask_name, torch.float32, backward=False)
    assert mixer_checks.parity("causal_decay", form, mask_name, torch.float32, backward=False) == "passed"


def test_a_recurrence_that_reads_the_peeking_decay_too_still_fails_its_cell(plugin):
    """Where the recurrence repeats the bug, output and reference agree; the form's output before a token still
    changes with the tokens after it."""
    with pytest.raises(AssertionError, match=r"^peeking_twice x chunked x causal x torch.float32 x forward: the "
                                             r"output before token 13 changes with the tokens after it"):  # fmt: skip
        mixer_checks.parity("peeking_twice", "chunked", "causal", torch.float32, backward=False)


def test_a_mixer_without_a_recurrence_of_its_own_fails_saying_so(plugin):
    message = r"^unproven x chunked x causal x torch.float32 x forward: mixer 'unproven' .* has no reference\(\)"
    with pytest.raises(AssertionError, match=message):
        mixer_checks.parity("unproven", "chunked", "causal", torch.float32, backward=False)
    with pytest.raises(AssertionError, match=r"^unproven x chunked x causal: decoding from an empty cache: .*no ref"):
        mixer_checks.decode("unproven", "chunked", "causal", prefilled=False)


SETTINGS = [  # what the kit's cells (each mixer's defaults, with a convolution) leave out
    (LinearAttention, {"feature_map": "identity", "normalize": False, "gate": True}),
    (LinearAttention, {"feature_map": "elementwise_product", "normalize": False, "norm": True, "conv": True}),
    (Retention, {"conv": False, "gate": False, "norm": False}),
    (GLA, {"conv": True, "gate": False}),
    (DeltaNet, {"conv": False, "gate": True}),
    (GatedDeltaNet, {"norm": False}),
    (GatedDeltaProduct, {"n_householder": 3, "conv": False, "l2_eps": 1e-6, "allow_neg_eigval": True}),
    (KDA, {"conv": False, "gate": False, "norm": False, "l2_eps": 1e-6, "allow_neg_eigval": True}),
    (Mamba2, {"conv": False, "gate": False, "norm": False}),
    (RWKV7, {"gate": False, "norm": False}),
]


@pytest.mark.parametrize(("cls", "settings"), SETTINGS, ids=lambda value: getattr(value, "name", str(value)))
def test_each_built_in_recurrence_follows_its_mixer_s_settings(cls, settings):
    """Each built-in mixer's `reference` under the settings its kit cells do not cover, against its chunked form,
    across packed documents, to decoding's tolerance."""
    torch.manual_seed(0)
    layer = cls(16, 32, n_head=4, chunk=8, **settings).double()
    x, mask = torch.randn(2, 21, 16, dtype=torch.float64), mixer_checks.MASKS["document"]
    torch.testing.assert_close(layer.reference(x, mask), layer(x, mask=mask)[0], rtol=1e-9, atol=1e-9)


@pytest.mark.slow(reason="runs the kit in a second pytest with the plugin installed (~20 s)")
def test_the_matrix_draws_the_peeking_mixer_s_failed_cells_once(tmp_path):
    """`pytest --pyargs andrea.testing --andrea-mixers peeking`, from andrea's own folder (where a second conftest
    loads the report's hook too): every parity cell fails and is drawn X, as is decoding from a prefilled cache,
    whose first call reads the later tokens at once; decoding one token at a time from an empty cache cannot peek
    and passes. The matrix is printed once, its count equal to pytest's."""
    install(tmp_path / "site")
    root = Path(__file__).parents[2]
    done = run_kit(root, "--andrea-mixers", "peeking", env=user_shell(tmp_path / "site"))
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert out.count("token mixer parity matrix") == 1 and "attention parity matrix" not in out
    report = out[out.index("token mixer parity matrix") :].splitlines()
    assert report[1].split() == ["mixer", "mask", "parallel", "chunked", "recurrent"]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in report[2:] if line.startswith("peeking ")}
    assert rows == {("peeking", mask): ["XXX.X"] * 3 for mask in ("causal", "document", "padding")}
    assert "each column, per form: float32 forward, float32 backward, bfloat16 forward, decode empty, " in out
    assert "45 cells: 9 passed, 36 failed, 0 unsupported" in out
    assert out.strip().splitlines()[-1].startswith("36 failed, ")  # pytest's own count of them


NEGATIVE = "deltanet[allow_neg_eigval=true]"


def test_a_setting_s_row_is_built_with_it():
    """DeltaNet's `kit_settings` are a row of their own, built with β up to 2; its default row keeps β below 1."""
    rows = mixer_checks.mixer_rows()
    assert rows[NEGATIVE] == ("deltanet", {"allow_neg_eigval": True}) and rows["deltanet"] == ("deltanet", {})
    assert {"gated_deltanet[allow_neg_eigval=true]", "kda[allow_neg_eigval=true]"} <= set(rows)
    assert (
        mixer_checks.build(NEGATIVE, "chunked").beta_max == 2.0
        and mixer_checks.build("deltanet", "chunked").beta_max == 1.0
    )


def test_eigenvalues_near_minus_one_need_the_recurrence_s_own_error_and_pass_with_it(monkeypatch):
    """The float32 chunked gradient of DeltaNet's key projection with β up to 2 is off the float64 recurrence by
    more than float32's tolerance; the recurrence itself in float32 is off by as much, and the cell passes with
    the tolerance widened by it."""
    cell = (NEGATIVE, "chunked", "causal", torch.float32, True)
    assert mixer_checks.parity(*cell) == "passed"
    monkeypatch.setattr(mixer_checks, "OWN_ERROR", 0)
    with pytest.raises(AssertionError, match=r"k_proj\.weight's gradient differs \(beyond 0x the recurrence's own"):
        mixer_checks.parity(*cell)


def test_a_form_off_by_a_tenth_of_a_percent_fails_beyond_the_widened_tolerance(monkeypatch):
    """The widening is the recurrence's own float32 error, far below a form's slip: one output 0.1% too large fails
    the same cell, in its forward."""
    forward = DeltaNet.forward

    def slipped(self, x, *args, **kwargs):
        out, weights = forward(self, x, *args, **kwargs)
        return out * 1.001, weights

    monkeypatch.setattr(DeltaNet, "forward", slipped)
    cell = r"^deltanet\[allow_neg_eigval=true\] x chunked x causal x torch\.float32 x backward: "
    with pytest.raises(AssertionError, match=cell + r"output differs from the reference's \(beyond 4x"):
        mixer_checks.parity(NEGATIVE, "chunked", "causal", torch.float32, backward=True)


@pytest.mark.parametrize(("chosen", "rows"), [("deltanet", {"deltanet", NEGATIVE}), (NEGATIVE, {NEGATIVE})])
def test_choosing_a_mixer_runs_its_setting_rows_and_a_row_runs_alone(tmp_path, chosen, rows):
    """`--andrea-mixers deltanet` collects DeltaNet's rows, its defaults' and its setting's, 45 cells each;
    `--andrea-mixers 'deltanet[allow_neg_eigval=true]'` that row's alone."""
    done = run_kit(tmp_path, "--collect-only", "-m", "", "--andrea-mixers", chosen)
    cells = [line for line in done.stdout.splitlines() if "test_mixer_parity[" in line or "test_mixer_decode[" in line]
    assert done.returncode == 0 and len(cells) == 45 * len(rows), done.stdout[-2000:]
    assert {re.sub(r"^.*?\[(.+?)-(parallel|chunked|recurrent)-.*$", r"\1", line) for line in cells} == rows
