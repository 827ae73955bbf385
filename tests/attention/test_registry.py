"""The registries: built-ins, unknown names, and a plugin declared only through entry-point metadata."""

import sys

import pytest
import torch

from andrea.attention import (
    AttentionBackend,
    Causal,
    MultiHeadSelfAttention,
    UnsupportedAttentionError,
    backend_registry,
    get_backend,
    mask_registry,
    mechanism_registry,
    parse_mask,
)
from andrea.attention.heads import FusedQKV
from andrea.core.plugins import PluginClash

from .helpers import files_plugin

BUILT_INS = {"eager", "flex", "naive", "sdpa"}  # plugins may add more: never assert the exact list

PLUGIN = '''
import torch
from andrea.attention import AttentionBackend, Capabilities, Mask, masked_softmax


class CausalOnlyBackend(AttentionBackend):
    """Materialised attention that accepts nothing but causal masks and MHA."""

    name = "causal_only"
    capabilities = Capabilities(native_weights=False, native_gqa=False, mask_kinds=frozenset({"causal"}))

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None):
        allowed = mask.dense(q.shape[2], k.shape[2], device=q.device)
        weights = masked_softmax(q @ k.transpose(-2, -1) * scale, allowed)
        return weights @ v, None


class EveryOther(Mask):
    """Attend to keys at even positions and to yourself."""

    kind = "every_other"

    def __eq__(self, other):
        return isinstance(other, EveryOther)

    def __hash__(self):
        return hash("every_other")

    def predicate(self, b, h, q_idx, kv_idx):
        return (kv_idx % 2 == 0) | (q_idx == kv_idx)
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A third-party package installed as files only: a module and its dist-info entry points."""
    files_plugin(tmp_path, "zoo_plugin", [
        ("andrea.attention_backends", "causal_only", "zoo_plugin:CausalOnlyBackend"),
        ("andrea.attention_masks", "every_other", "zoo_plugin:EveryOther"),
    ], {"zoo_plugin": PLUGIN})  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    backend_registry.refresh()
    mask_registry.refresh()
    yield
    backend_registry.refresh()
    mask_registry.refresh()
    sys.modules.pop("zoo_plugin", None)


def test_builtin_names():
    assert {"naive", "eager", "sdpa", "flex"} <= set(backend_registry.names())
    assert {"causal", "none", "sliding_window", "prefix_lm", "padding", "document"} <= set(mask_registry.names())


def test_unknown_backend_lists_the_available_ones():
    with pytest.raises(ValueError, match="unknown attention backend 'fast'; available: ") as refused:
        get_backend("fast")
    assert set(str(refused.value).split("available: ")[1].split(" (")[0].split(", ")) >= BUILT_INS
    with pytest.raises(
        ValueError, match="attention.backend='fast' is unknown; available: "
    ):  # the spec's words, as the config's
        MultiHeadSelfAttention(32, 4, backend="fast")


def test_unknown_backend_option():
    with pytest.raises(
        ValueError, match="attention backend 'sdpa' takes \\(\\), got {'compile': True}: got an unexpected keyword"
    ):
        get_backend("sdpa", compile=True)


def test_plugin_backend_runs_through_the_whole_block(plugin):
    assert "causal_only" in backend_registry.names()
    plugin_block = MultiHeadSelfAttention(32, 4, 2, backend="causal_only", max_context=16)
    reference = MultiHeadSelfAttention(32, 4, 2, backend="naive", max_context=16)
    reference.load_state_dict(plugin_block.state_dict())
    x = torch.randn(2, 10, 32, requires_grad=True)
    y, weights = plugin_block(x, return_weights=True)  # k/v expanded for it, weights from the probe
    y_ref, weights_ref = reference(x, return_weights=True)
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, weights_ref)
    y.sum().backward()
    grad = _fused(plugin_block).weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_plugin_capabilities_are_enforced(plugin):
    with pytest.raises(
        UnsupportedAttentionError,
        match="'causal_only' does not accept mask kind\\(s\\) sliding_window; use attention backend ",
    ) as refused:
        MultiHeadSelfAttention(32, 4, backend="causal_only", mask="sliding_window(window=4)")
    assert set(str(refused.value).split("use attention backend ")[1].split(" / ")) >= BUILT_INS


def test_plugin_mask(plugin):
    mask = parse_mask("causal & every_other")
    assert mask.dense(4, 4)[0, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]]
    block = MultiHeadSelfAttention(16, 2, backend="flex", mask=mask, max_context=8)
    with torch.no_grad():
        _, weights = block(torch.randn(1, 4, 16), return_weights=True)
    assert (weights[0, :, 2, 1] == 0).all() and (weights[0, :, 3, 1] == 0).all()


def test_a_plugin_with_a_taken_name_is_one_warning_and_skipped(tmp_path, monkeypatch):
    """A plugin named as a built-in, and two plugins with one name: one warning each naming both packages, the
    built-in (or the first plugin found) kept, the other skipped; every lookup still works."""
    files_plugin(tmp_path, "shadow", [("andrea.attention_backends", "sdpa", "shadow:Fake"),
                                      ("andrea.attention_mechanisms", "twin", "shadow:First")])  # fmt: skip
    files_plugin(tmp_path, "shadow_too", [("andrea.attention_mechanisms", "twin", "shadow_too:Second")])
    monkeypatch.syspath_prepend(str(tmp_path))
    backend_registry.refresh()
    mechanism_registry.refresh()
    try:
        with pytest.warns(PluginClash) as caught:
            assert "sdpa" in backend_registry.names() and "twin" in mechanism_registry.names()
        messages = sorted(str(w.message) for w in caught)
        assert messages == [
            "attention backend 'sdpa' is declared by andrea (a built-in) and by package shadow; andrea (a built-in)'s "
            "is kept, the other skipped: rename one in its 'andrea.attention_backends' entry points",
            "attention mechanism 'twin' is declared by package shadow and by package shadow_too; package shadow's is "
            "kept, the other skipped: rename one in its 'andrea.attention_mechanisms' entry points",
        ]
        assert type(get_backend("sdpa")).__module__ == "andrea.attention.backends.sdpa"
        assert mechanism_registry._discover()["twin"].value == "shadow:First"
    finally:
        monkeypatch.undo()
        backend_registry.refresh()
        mechanism_registry.refresh()


def test_as_mask_reads_every_form_a_config_or_a_file_gives():
    from andrea.attention import Causal, NoMask, SlidingWindow, as_mask

    window = as_mask({"name": "sliding_window", "window": 3})  # conf/mask/sliding_window.yaml's form
    assert isinstance(window, SlidingWindow) and window.window == 3
    assert isinstance(as_mask("causal"), Causal) and isinstance(as_mask(None), NoMask)
    assert as_mask(window) is window
    with pytest.raises(ValueError, match="is not a mask"):
        as_mask({"window": 3})


COMPUTE_PLUGIN = """
from andrea.attention import AttentionBackend


class OldEntry(AttentionBackend):
    name = "old_entry"

    def compute(self, q, k, v, mask, scale, need_weights, score_mod, mechanism=None):
        return q, None

    def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None):
        return q, None
"""


def test_a_plugin_that_overrides_compute_is_refused_in_one_line_naming_forward(tmp_path, monkeypatch):
    files_plugin(tmp_path, "old_zoo", [("andrea.attention_backends", "old_entry", "old_zoo:OldEntry")],
                 {"old_zoo": COMPUTE_PLUGIN})  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    backend_registry.refresh()
    try:
        with pytest.raises(ValueError) as refused:
            get_backend("old_entry")
        (line,) = str(refused.value).splitlines()
        assert (
            "old_zoo" in line
            and (
                "attention backend class OldEntry overrides compute(), which andrea no longer calls: implement "
                "forward(q, k, v, *, mask, scale, need_weights, **kwargs) instead"
            )
            in line
        )
    finally:
        monkeypatch.undo()
        backend_registry.refresh()
        sys.modules.pop("old_zoo", None)


def test_one_way_in_new_keywords_reach_only_the_backends_that_name_them():
    from andrea.attention.backends.eager import EagerBackend

    seen = []

    class Open(EagerBackend):  # the documented signature: every keyword, later ones too
        name = "open"

        def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None, mechanism=None, **kwargs):
            seen.append(sorted(kwargs))
            return super().forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights, score_mod=score_mod)

    class Old(AttentionBackend):  # written before mechanism and **kwargs
        name = "old"

        def forward(self, q, k, v, *, mask, scale, need_weights, score_mod=None):  # type: ignore[override]
            return EagerBackend().forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights)

    class NoStar(AttentionBackend):  # its arguments named without `*`: still given by keyword
        name = "no_star"

        def forward(self, q, k, v, mask=None, scale=None, need_weights=False):  # type: ignore[override]
            assert mask is not None and scale is not None, "the mask and the scale must reach it"
            return EagerBackend().forward(q, k, v, mask=mask, scale=scale, need_weights=need_weights)

    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    torch.testing.assert_close(NoStar()(q, k, v, Causal())[0], EagerBackend()(q, k, v, Causal())[0])
    out, _ = Open()(q, k, v, Causal(), layer_hint=3)
    old, _ = Old()(q, k, v, Causal(), layer_hint=3)  # a keyword it does not name never reaches it
    assert seen == [["layer_hint"]]
    torch.testing.assert_close(out, old)
    calls = []

    class Counted(Open):
        def __call__(self, *args, **kwargs):
            calls.append(kwargs["mask"])
            return super().__call__(*args, **kwargs)

    MultiHeadSelfAttention(16, 2, backend=Counted())(torch.randn(1, 4, 16))
    assert len(calls) == 1  # the block comes in through the backend's call, as every caller does


def _fused(block: MultiHeadSelfAttention) -> FusedQKV:
    """The block's fused W_Q, W_K, W_V (every block here has one: none is latent)."""
    assert block.qkv is not None
    return block.qkv
