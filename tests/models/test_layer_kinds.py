"""The layer as the unit of a network: named kinds in a pattern, each layer its own mixer and settings
(andrea.mixers.layer_spec). Five networks the field studies, from the command line: each trains, draws its maps,
saves a checkpoint whose file rebuilds it, and generates with its caches what recomputing gives; the slow test
goes on to andrea-sample and andrea-inspect as a user's shell runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from andrea.attention.block import MultiHeadSelfAttention
from andrea.mixers.layer_spec import resolve_layers
from andrea.models.files.load import load_any
from andrea.models.generate import generate, stream
from andrea.models.network import network
from andrea.train.config import ConfigError, validate
from andrea.train.pipeline import train
from andrea.utils.rules import SettingError
from tests.compose import QUICK, compose_train

TINY = [*QUICK, "model=andrea-tiny", "data.num_train=320", "trainer.max_steps=5", "validate=false"]
SWA8 = "{mixer: attention, mask: {name: sliding_window, window: 8}"
NETS = {
    "gemma3": [
        "position=rope", "model.net.n_layer=6",
        f"model.net.kinds={{local: {SWA8}, position: {{kind: rope, base: 10000}}}}, "
        "global: {mixer: attention, position: {kind: rope, base: 1000000}}}",
        "model.net.layout=[local,local,local,local,local,global]",
    ],
    "sinks": [
        "mechanism=sink", "position=rope", "model.net.n_layer=8",
        "model.net.kinds={local: {mixer: attention, mask: {name: sliding_window, window: 4}}, "
        "global: {mixer: attention}}",
        "model.net.layout=[local,global]",
    ],
    "samba": ["mixer=mamba2", "position=rope", "model.net.n_layer=4", f"model.net.kinds={{swa: {SWA8}}}}}",
              "model.net.layout=[mamba2,swa]"],
    "two_gla": [
        "position=none", "model.net.n_layer=4",
        "model.net.kinds={narrow: {mixer: gla, expand_k: 0.5}, wide: {mixer: gla, expand_k: 1.0}}",
        "model.net.layout=[narrow,wide]",
    ],
    "nope": [
        "position=rope", "model.net.n_layer=4",
        "model.net.kinds={quarter: {mixer: attention, position: {kind: rope, fraction: 0.25}}, "
        "nope: {mixer: attention, position: {kind: none}}}",
        "model.net.layout=[quarter,quarter,quarter,nope]",
    ],
    "parallel": [
        "position=rope", "model.net.n_layer=2",
        "model.net.kinds={hybrid: {parallel: {attention: {mixer: attention}, ssm: {mixer: mamba2, n_head: 4}}}}",
        "model.net.layout=[hybrid]",
    ],
}  # fmt: skip
COVERED = ("gemma3", "sinks")  # the gemma3 and gpt-oss presets prove these patterns against transformers by default


def _what_each_layer_is(net) -> list[str]:
    """Each layer's mixer as its kind makes it: the mask, RoPE's base and share, or the mixer's key width."""
    described = []
    for mixer in net.mixers:
        if isinstance(mixer, MultiHeadSelfAttention):
            rope = getattr(mixer.inputs, "rope", None)
            turned = "none" if rope is None else f"rope {rope.base:g} {rope.width}/{mixer.head_dim}"
            described.append(f"{mixer.mask.name} {turned} {mixer.mechanism.name}")
        else:
            described.append(f"{mixer.name} k{getattr(mixer, 'key_dim', '')}")
    return described


EXPECTED = {
    "gemma3": ["sliding_window_8 rope 10000 16/16 softmax"] * 5 + ["causal rope 1e+06 16/16 softmax"],
    "sinks": ["sliding_window_4 rope 10000 16/16 sink", "causal rope 10000 16/16 sink"] * 4,
    "samba": ["mamba2 k", "sliding_window_8 rope 10000 16/16 softmax"] * 2,
    "two_gla": ["gla k8", "gla k16"] * 2,
    "nope": ["causal rope 10000 4/16 softmax"] * 3 + ["causal none softmax"],
    "parallel": ["parallel k"] * 2,
}


KV, STATE = "keys and values", "state"
CACHES = {  # what each layer keeps to generate from, as its spec says (a run's result.json: cache_bytes)
    "gemma3": [f"{KV}, last 8 tokens"] * 5 + [KV],
    "sinks": [f"{KV}, last 4 tokens", KV] * 4,
    "samba": [STATE, f"{KV}, last 8 tokens"] * 2,
    "two_gla": [STATE] * 4,
    "nope": [KV] * 4,
    "parallel": [f"{KV} + {STATE}"] * 2,
}


@pytest.fixture(scope="module", params=[pytest.param(name, marks=pytest.mark.slow if name in COVERED else ())
                                        for name in NETS])  # fmt: skip
def trained(request, tmp_path_factory):
    """Each network trained 5 steps from the command line, maps on (the default callbacks)."""
    run = tmp_path_factory.mktemp(request.param)
    result = train(compose_train(run, [*TINY, *NETS[request.param]]))
    return request.param, run, result


def test_each_net_trains_draws_its_maps_and_saves_a_file_that_rebuilds_it(trained):
    name, run, result = trained
    assert result.status == "completed" and result.global_step == 5
    assert [layer["cache"] for layer in result.cache_bytes["layers"]] == CACHES[name]
    layers = len(EXPECTED[name])
    drawn = {p.name for p in (run / "attention_maps").glob("*.png")}
    assert {f"layer{layer}_step000005.png" for layer in range(layers)} <= drawn
    net, _, _ = load_any(run / "checkpoints" / "last.ckpt", "cpu")
    assert _what_each_layer_is(net) == EXPECTED[name]


def test_each_net_generates_with_its_caches_what_recomputing_gives(trained):
    """Greedy tokens from the caches (a window's KV cache holding at most its window, a state) and from the
    whole sequence each step agree, past every window."""
    _, run, _ = trained
    module = load_any(run / "checkpoints" / "last.ckpt", "cpu")[0]
    net = network(module)
    prompt = torch.randint(0, net.vocab_size, (2, 3), generator=torch.Generator().manual_seed(0))
    cached = generate(module, prompt, 20, top_k=1, generator=torch.Generator().manual_seed(0))
    recomputed = generate(module, prompt, 20, top_k=1, generator=torch.Generator().manual_seed(0), use_cache=False)
    assert torch.equal(cached, recomputed)
    caches = net.new_cache()
    with torch.no_grad():
        for token in cached.split(1, dim=1):  # one token at a time, as generation feeds them
            net(token, cache=caches)
    attention = [(mixer, cache) for mixer, cache in zip(net.mixers, caches, strict=True) if hasattr(mixer, "mask")]
    kept = [len(cache) for _, cache in attention]  # type: ignore[arg-type]
    windows = [mixer.mask.max_lookback or cached.shape[1] for mixer, _ in attention]
    assert kept == windows  # a window's KV cache holds its window, a full layer's every token
    said = [spec.cache for spec in net.layer_specs if spec.attention]  # as each layer's spec says
    assert said == [f"keys and values, last {n} tokens" if n < cached.shape[1] else "keys and values" for n in kept]


def test_each_net_streams_past_its_context(trained):
    """StreamingLLM's cache (attention layers keep 2 sinks and a window, renumbered; a state stays a state)
    generates twice the context the network trained on."""
    _, run, _ = trained
    module = load_any(run / "checkpoints" / "last.ckpt", "cpu")[0]
    context = network(module).max_context
    steps = list(stream(module, torch.tensor([[1, 2, 3]]), 2 * context, temperature=0, window=context // 2,
                        keep_first=2))  # fmt: skip
    assert len(steps) == 2 * context and all(torch.isfinite(logits).all() for _, logits in steps)


@pytest.mark.slow  # reason: andrea-sample and andrea-inspect processes on each network
def test_each_net_samples_and_is_inspected_from_the_shell(trained, tmp_path):
    _, run, _ = trained
    checkpoint = run / "checkpoints" / "last.ckpt"
    sample = [sys.executable, "-m", "andrea.cli.sample", f"ckpt_path={checkpoint}", "prompt=3 5 9", "temperature=0"]
    done = subprocess.run([*sample, "max_new_tokens=12"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 15 and "cache=on" in done.stderr
    page = tmp_path / "explorer.html"
    inspect = [sys.executable, "-m", "andrea.cli.inspect", str(checkpoint), f"out={page}"]
    done = subprocess.run(inspect, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert page.stat().st_size > 0


REFUSED = [
    (["model.net.kinds={local: {mixer: attention, mask: {name: sliding_window, window: 0}}}",
      "model.net.layout=[local,attention]"], "model.net.kinds.local.mask.window=0 must be a positive integer"),
    (["mixer=gla", "model.net.kinds={both: {mixer: attention, mask: none}}", "model.net.layout=[gla,both]"],
     "model.net.kinds.both.mask=none sees later tokens, and mixer gla beside it is causal by construction"),
    (["mixer=gla", "mask=prefix_lm", "model.net.layout=[gla,attention]"],
     "mask=prefix_lm_"),
]  # fmt: skip


@pytest.mark.parametrize("overrides, message", REFUSED, ids=[m.split("=")[0].split(" ")[0] for _, m in REFUSED])
def test_a_kind_that_cannot_be_is_refused_by_its_key_before_anything_is_built(overrides, message, tmp_path):
    with pytest.raises(ConfigError) as refused:
        validate(compose_train(tmp_path, [*TINY, "model.net.n_layer=2", *overrides]))
    assert str(refused.value).startswith(message), str(refused.value)


ATTENTION = {"n_head": 4, "mask": "causal", "position": "learned", "backend": "sdpa"}  # andrea-tiny's, flat
SIZES = {"d_model": 64, "max_context": 32}
RESOLVED = [
    ({"local": {"mixer": "attention", "maks": "causal"}}, ["local"],
     "model.net.kinds.local.maks is not a setting of an attention kind"),
    ({"wide": {"mixer": "gla", "expand_q": 1.0}}, ["wide"],
     "model.net.kinds.wide.expand_q is not a setting of mixer gla"),
    ({"wide": {"mixer": "gla", "expand_k": -1.0}}, ["wide"], "model.net.kinds.wide.expand_k=-1.0 must be"),
    ({"wide": {"mixer": "gla"}}, ["attention"],
     "model.net.kinds.wide is in no layer of model.net.layout=['attention']"),
    ({"odd": {"mixer": "attention", "position": {"kind": "rope", "fraction": 0.3}}}, ["odd"],
     "model.net.kinds.odd.position.fraction=0.3 of a head of 16 channels turns 4.8"),
    ({"odd": {"mixer": "attention", "position": {"kind": "learned"}}}, ["odd"],
     "model.net.kinds.odd.position.kind='learned' is not a layer's position"),
    ({"odd": {"mixer": "attention", "position": {"base": 500000}}}, ["odd"],
     "model.net.kinds.odd.position.base turns RoPE, and this kind's position is learned"),
    ({"odd": {"mixer": "attention", "heads": {"n_head": 5}}}, ["odd"],
     "model.net.d_model=64 is not divisible by model.net.kinds.odd.heads.n_head=5"),
    ({"odd": {"mixer": "mamba"}}, ["odd"], "model.net.kinds.odd.mixer='mamba' is not a token mixer"),
    ({"odd": 3}, ["odd"], "model.net.kinds.odd=3 must be a mapping"),
]  # fmt: skip


@pytest.mark.parametrize("kinds, layout, message", RESOLVED, ids=[m.split(" ")[0] for _, _, m in RESOLVED])
def test_a_kind_that_cannot_be_is_refused_by_its_key_when_the_layers_resolve(kinds, layout, message):
    """What the config checks refuse (they resolve the layers first), said by resolving them."""
    with pytest.raises(SettingError) as refused:
        resolve_layers(layout, 2, kinds=kinds, attention=ATTENTION, place=SIZES)
    assert str(refused.value).startswith(message), str(refused.value)


def test_a_kind_named_only_in_the_pattern_has_the_defaults_its_mixer_group_gives(tmp_path):
    """model.net.layout=[gla,attention] with the attention mixer: the GLA layers get conf/mixer/gla.yaml's settings
    (n_head the heads group's), as mixer=gla would give them."""
    named = validate(compose_train(tmp_path, [*TINY, "heads.n_head=2", "model.net.layout=[gla,attention]"]))
    chosen = validate(
        compose_train(tmp_path, [*TINY, "heads.n_head=2", "mixer=gla", "model.net.layout=[gla,attention]"])
    )
    assert named.module.net.layer_specs[0].settings == chosen.module.net.layer_specs[0].settings
    assert named.module.net.mixers[0].n_head == 2


def test_the_attention_groups_are_the_default_kind_and_a_kind_overrides_one_setting(tmp_path):
    """A kind without a setting takes the groups' (heads=gqa, mechanism); its own mask replaces the group's."""
    kinds = "model.net.kinds={local: {mixer: attention, mask: {name: sliding_window, window: 4}}}"
    parts = validate(compose_train(tmp_path, [*TINY, "heads=gqa", kinds, "model.net.layout=[local,attention]"]))
    local, full = parts.module.net.mixers
    assert (local.heads.n_kv_head, full.heads.n_kv_head) == (2, 2)
    assert (local.mask.name, full.mask.name) == ("sliding_window_4", "causal")
    over = "model.net.kinds.local.mask.window=2"
    parts = validate(compose_train(tmp_path, [*TINY, kinds, over, "model.net.layout=[local,attention]"]))
    assert parts.module.net.mixers[0].mask.name == "sliding_window_2"


def test_a_network_without_attention_keeps_no_attention_settings(tmp_path):
    """mixer=gla in every layer: no attention block in the network, its saved config or its file's schema, whose
    parameter count is still the built network's; a file whose layers have attention needs one."""
    from andrea.models import memory
    from andrea.models.files.schema import ModelFileError, parse

    parts = validate(compose_train(tmp_path, [*TINY, "mixer=gla"]))
    config = parts.module.net_config
    assert config["attention"] is None
    assert not any(isinstance(mixer, MultiHeadSelfAttention) for mixer in parts.module.net.mixers)
    spec = parse(config, "gla.ckpt", "andrea_net_config")
    assert spec.attention is None and [layer.mixer for layer in spec.layers] == ["gla", "gla"]
    assert memory.parameters(spec) == parts.module.net.num_parameters()
    with pytest.raises(ModelFileError, match="andrea_net_config.attention is missing, and the network's layers"):
        parse({**config, "layout": ["gla", "attention"]}, "gla.ckpt", "andrea_net_config")


def test_the_mask_group_sets_the_attention_layers_beside_a_recurrent_one(tmp_path):
    """mask=sliding_window (a causal window) on GLA then attention: the attention layer keeps the window; GLA,
    causal by construction, is untouched."""
    overrides = [*TINY, "mixer=gla", "mask=sliding_window", "model.net.layout=[gla,attention]"]
    gla, attention = validate(compose_train(tmp_path, overrides)).module.net.mixers
    assert attention.mask.name == "sliding_window_8" and attention.new_cache().max_lookback == 8
    assert gla.name == "gla"


def test_gpt2_s_architecture_cannot_hold_a_named_kind():
    """A kind that changes the default attention layers (named attention) is refused by the GPT-2 export as other
    layers are."""
    from andrea.models.files.hf_export import does_not_fit

    config = {"_target_": "andrea.models.gpt.GPT", "position": "learned", "attention": {"n_head": 4}}
    assert does_not_fit(config) is None
    window = {"attention": {"mixer": "attention", "mask": {"name": "sliding_window", "window": 4}}}
    assert does_not_fit(config | {"kinds": window}) == (
        "model.net.kinds is attention; GPT-2's architecture holds none (every layer of one kind) only"
    )


def test_the_maps_take_each_layer_s_mask_from_the_layer(monkeypatch):
    """A window layer's cells beyond its window and a full layer's later cells, each read from the layer's own mask
    buffer: no mask is built densely again (a mask's dense form would raise here)."""
    from andrea.attention.masks.base import Mask
    from andrea.models.gpt import GPT
    from andrea.models.weight_styles import allowed_of

    kinds = {"local": {"mixer": "attention", "mask": {"name": "sliding_window", "window": 3}}}
    net = GPT(vocab_size=11, max_context=16, n_layer=2, d_model=16, attention={"n_head": 2}, kinds=kinds,
              layout=["local", "attention"])  # fmt: skip

    def rebuilt(*args, **kwargs):
        raise AssertionError("a mask built densely again")

    monkeypatch.setattr(Mask, "dense", rebuilt)
    window, full = allowed_of(network(net), 8) or []
    assert window.sum(dim=1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3]  # each query sees at most 3 keys
    assert torch.equal(full, torch.ones(8, 8, dtype=torch.bool).tril())


def test_a_kind_s_part_that_refuses_as_the_network_builds_is_said_of_the_kind(tmp_path):
    """Forgetting attention keeps a gate per head in its keys: in a kind with GQA's shared key heads it is refused,
    the kind named before the part's own words."""
    kinds = "model.net.kinds={gated: {mixer: attention, mechanism: fox, backend: eager}}"
    with pytest.raises(ConfigError) as refused:
        validate(compose_train(tmp_path, [*TINY, "heads=gqa", kinds, "model.net.layout=[gated,attention]"]))
    assert str(refused.value).startswith("model.net.kinds.gated: mechanism=fox keeps one gate per head in its keys")
