"""The token-mixer seam (andrea.mixers): a layer is `x + mixer(norm(x))`, each layer's mixer named by the config
(`mixer=`, `model.net.layout`). `mixer=attention` and `layout=[attention]` build today's model exactly; another
mixer, registered as a plugin would be, takes its layers in the layout, trains, generates from its own cache,
and shows its points under `blocks.<l>.attn.` like attention's."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from torch import Tensor, nn

from andrea.core.hook_points import HookPoint, Points
from andrea.mixers import CacheSize, TokenMixer, mixer_registry, resolve_layers
from andrea.models.generate import generate
from andrea.models.gpt import GPT
from andrea.models.toy import ToyModel
from tests.compose import QUICK, compose_train

V, L = 17, 12


class MeanState:
    """A fixed-size cache: the running sum of values and how many tokens it holds."""

    def __init__(self) -> None:
        self.total: Tensor | None = None
        self.next_position = 0


class CausalMean(nn.Module):
    """y_t = W_O · mean(W_V x_0 .. W_V x_t): a mixer whose implied weights are 1/(t+1) on every past token."""

    def __init__(self, d_model: int, max_context: int, layer: int, n_layer: int, dropout: float = 0.0,
                 bias: bool = False, scale: float = 1.0) -> None:  # fmt: skip
        super().__init__()
        self.value, self.proj, self.scale = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model), scale
        self.points = Points(("hook_v", "hook_z"))

    def forward(self, x: Tensor, return_weights: bool = False, cache: MeanState | None = None):
        B, T, D = x.shape
        v = self.points["hook_v"](self.value(x)) * self.scale  # (B, T, D)
        start = 0 if cache is None else cache.next_position
        total = v.cumsum(1) if cache is None or cache.total is None else v.cumsum(1) + cache.total[:, None]
        z = self.points["hook_z"](total / torch.arange(start + 1, start + T + 1).view(1, T, 1))
        if cache is not None:
            cache.total, cache.next_position = total[:, -1], start + T
        S = start + T
        weights = (torch.ones(T, S).tril(start) / torch.arange(start + 1, S + 1).view(T, 1)).expand(B, 1, T, S)
        return self.proj(z), weights if return_weights else None

    def new_cache(self) -> MeanState:
        return MeanState()

    def hook_points(self) -> dict[str, HookPoint]:
        return dict(self.points)

    def cache_size(self) -> CacheSize:
        return CacheSize(per_token=0, per_sequence=self.value.out_features)


@pytest.fixture
def mean_mixer(monkeypatch):
    """`mean` in the registry, where a package's entry point would put it."""
    monkeypatch.setitem(mixer_registry.builtins, "mean", f"{__name__}:CausalMean")


def _gpt(**kwargs) -> GPT:
    torch.manual_seed(0)
    return GPT(vocab_size=V, max_context=L, n_layer=4, d_model=32, attention=dict(n_head=4), **kwargs)


def test_attention_in_every_layer_is_todays_model():
    """mixer=attention and layout=[attention] give the same parameters, names and outputs as neither."""
    idx = torch.randint(0, V, (2, L))
    base = _gpt()
    for kwargs in (dict(mixer={"name": "attention"}), dict(layout=["attention"]), dict(layout=["attention"] * 2)):
        other = _gpt(**kwargs)
        assert list(other.state_dict()) == list(base.state_dict())
        torch.testing.assert_close(other(idx)[0], base(idx)[0], rtol=0, atol=0)


def test_the_command_lines_mixer_and_layout_build_todays_model(tmp_path):
    """`andrea-train mixer=attention` and `model.net.layout=[attention]` compose the default run's network."""
    nets = []
    for overrides in ([], ["mixer=attention"], ["model.net.layout=[attention]"]):
        torch.manual_seed(0)
        nets.append(instantiate(compose_train(tmp_path, [*QUICK, *overrides]).model.net))
    for net in nets[1:]:
        for (name, p), (_, q) in zip(net.state_dict().items(), nets[0].state_dict().items(), strict=True):
            assert torch.equal(p, q), name


def test_a_layout_repeats_to_the_layers_and_each_layer_gets_its_mixer(mean_mixer):
    net = _gpt(mixer={"name": "mean", "scale": 0.5}, layout=["attention", "mean"])
    assert [type(m).__name__ for m in net.mixers] == ["MultiHeadSelfAttention", "CausalMean"] * 2
    assert all(isinstance(m, TokenMixer) for m in net.mixers)
    assert [m.scale for m in net.mixers if isinstance(m, CausalMean)] == [0.5, 0.5]  # the mixer group's setting
    points = net.hook_points()
    assert {"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_v", "blocks.3.attn.hook_z"} <= set(points)
    assert points["blocks.1.attn.hook_z"].name == "blocks.1.attn.hook_z"
    assert "blocks.1.attn.hook_pattern" not in points
    assert net.mixers[1].cache_size().at(1000) == 32 and net.mixers[0].cache_size().at(10) == 10 * 2 * 32
    with pytest.raises(ValueError, match="layer 1 mixes tokens with mean, not attention"):
        _ = net.attention  # the head tools refuse a layer that has no heads


def test_a_hybrid_trains_and_generates_from_its_caches(mean_mixer):
    """Generation with each layer's own cache (a KV cache, a running sum) gives the tokens recomputing gives."""
    net = _gpt(layout=["mean", "attention"])
    idx = torch.randint(0, V, (2, 3))
    logits, _ = net(idx)
    logits.sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    cached = generate(net, idx, 8, generator=torch.Generator().manual_seed(1), top_k=1)
    recomputed = generate(net, idx, 8, generator=torch.Generator().manual_seed(1), top_k=1, use_cache=False)
    assert torch.equal(cached, recomputed)
    _, weights = net(idx, return_weights=True)
    assert [w.shape for w in weights] == [(2, 1, 3, 3), (2, 4, 3, 3)] * 2


def test_the_toy_model_takes_a_layout(mean_mixer):
    torch.manual_seed(0)
    net = ToyModel(V, L, d_model=16, n_layer=2, attention=dict(n_head=2), layout=["mean", "attention"])
    assert [type(m).__name__ for m in net.mixers] == ["CausalMean", "MultiHeadSelfAttention"]
    assert "blocks.0.attn.hook_v" in net.hook_points()


@pytest.mark.parametrize(
    "layout, n_layer, message",
    [
        (
            ["attention"] * 3,
            4,
            "model.net.layout has 3 names, which does not divide model.net.n_layer=4; give 1, 2 or 4 names",
        ),
        (["atention"], 4, "model.net.layout names 'atention', which is no kind or token mixer; use attention"),
        ("attention", 4, "model.net.layout='attention' must be a list of kind or mixer names"),
        ([], 4, "model.net.layout=[] must be a list of kind or mixer names"),
    ],
)
def test_a_layout_that_cannot_fill_the_layers_is_refused(layout, n_layer, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resolve_layers(layout, n_layer)


def test_a_network_resolves_once_into_one_frozen_spec_per_layer():
    """resolve_layers: each layer's mixer and its settings, the layout repeated; the spec read-only, a mixer named
    only in the layout with its class's defaults (no settings of its own), and the network keeps the specs it
    built its layers from."""
    import dataclasses

    from andrea.mixers import LayerSpec, resolve_layers

    specs = resolve_layers(["gla", "attention"], 4, {"name": "gla", "n_head": 2, "expand_k": 1.0})
    assert [(s.index, s.mixer, dict(s.settings)) for s in specs] == [
        (0, "gla", {"n_head": 2, "expand_k": 1.0}), (1, "attention", {}), (2, "gla", {"n_head": 2, "expand_k": 1.0}),
        (3, "attention", {}),
    ]  # fmt: skip
    assert [s.attention for s in specs] == [False, True, False, True]
    with pytest.raises(dataclasses.FrozenInstanceError):
        specs[0].mixer = "deltanet"  # type: ignore[misc]
    with pytest.raises(TypeError):
        specs[0].settings["chunk"] = 8  # type: ignore[index]
    assert dict(resolve_layers(["deltanet"], 1, {"name": "gla", "n_head": 2})[0].settings) == {}
    net = _gpt(layout=["gla", "attention"], mixer={"name": "gla", "n_head": 2})
    assert [s.mixer for s in net.layer_specs] == ["gla", "attention"] * 2 and isinstance(net.layer_specs[0], LayerSpec)
    assert [type(m).__name__ for m in net.mixers] == ["GLA", "MultiHeadSelfAttention"] * 2


def test_a_setting_the_mixer_does_not_take_is_refused(mean_mixer):
    with pytest.raises(ValueError, match="mixer.scal is not a setting of mixer mean; its settings are mixer.scale"):
        _gpt(mixer={"name": "mean", "scal": 2.0})
    with pytest.raises(ValueError, match="mixer.window is not a setting of mixer attention; its settings are the"):
        _gpt(mixer={"name": "attention", "window": 2})
    with pytest.raises(ValueError, match="model.net.mixer=.*is not a token mixer: give mixer=<name>, one of attention"):
        _gpt(mixer={"name": "mamba"})


def test_a_plugin_mixer_that_cannot_be_loaded_is_one_line(monkeypatch):
    """A package's `andrea.mixers` entry point whose module is missing: named in one line among the plugin
    warnings andrea-train prints, and refused in one line when a layout names it."""
    from importlib.metadata import EntryPoint

    from andrea.cli import app
    from andrea.cli.app import plugin_warnings
    from andrea.mixers.layers import broken_mixers

    broken = EntryPoint(name="hyena", value="no_such_package.mixer:Hyena", group="andrea.mixers")
    monkeypatch.setattr(mixer_registry, "_plugins", {"hyena": broken})
    monkeypatch.setattr(app, "plugin_groups", lambda: {"andrea.mixers"})  # as the package's metadata would say
    (line,) = broken_mixers()
    assert "'hyena = no_such_package.mixer:Hyena' (group 'andrea.mixers') cannot be loaded" in line
    assert line in plugin_warnings()
    with pytest.raises(ValueError, match="cannot be loaded: ModuleNotFoundError"):
        _gpt(layout=["hyena"])
