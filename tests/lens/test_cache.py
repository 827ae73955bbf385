"""Hook points, run_with_cache and hooks on andrea's own networks: every backend and mechanism, the toy model and
the GPT; hooks that edit an activation change the forward, and every hook goes when its block ends."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from andrea.attention import backend_registry, mechanism_registry
from andrea.lens.cache import add_hooks, hooks, run_with_cache
from andrea.lens.composition import composition_scores
from andrea.lens.patching import patch_heads
from andrea.models.gpt import GPT
from andrea.models.toy import ToyModel

CPU_BACKENDS = [name for name in backend_registry.names() if name not in ("triton", "flex")]


def gpt(**attention: Any) -> Any:
    torch.manual_seed(0)
    settings = {"n_head": 4, "backend": "eager", **attention}
    return GPT(vocab_size=32, max_context=16, n_layer=2, d_model=32, attention=settings).eval()


@pytest.mark.parametrize("mechanism", sorted(mechanism_registry.builtins))  # a plugin's: the kit
def test_the_pattern_point_holds_the_weights_and_an_identity_hook_changes_nothing(mechanism):
    """A hook on the scores or the pattern makes the block compute attention in the open (the mechanism's dense
    form): with an identity hook it gives the backend's output, and the cached pattern is return_weights'."""
    for backend in CPU_BACKENDS:
        capabilities, cls = backend_registry.load(backend).capabilities, mechanism_registry.load(mechanism)
        if capabilities.kernels is not None and cls.kernel not in capabilities.kernels:
            continue  # refused by this backend (the kit checks the refusal)
        if cls.extra_channels and not capabilities.distinct_value_dim:
            continue  # keys wider than the values (forgetting attention's gate): refused too
        net, ids = gpt(backend=backend, mechanism=mechanism), torch.randint(32, (2, 10))
        with torch.no_grad():
            logits, weights = net(ids, return_weights=True)
        cached_logits, cache = run_with_cache(net, ids, names=lambda name: name.endswith("hook_pattern"))
        torch.testing.assert_close(cached_logits, logits, atol=1e-5, rtol=1e-5)
        for layer in range(2):
            torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_pattern"], weights[layer])


def test_an_edited_pattern_is_what_the_values_are_weighted_with():
    """Every query made to attend to token 0 only: each position's z is then the first token's value."""
    net, ids = gpt(backend="sdpa"), torch.randint(32, (2, 10))

    def first_token(pattern, point):
        edited = torch.zeros_like(pattern)
        edited[..., 0] = 1
        return edited

    with hooks(net, {"blocks.0.attn.hook_pattern": first_token}):
        _, cache = run_with_cache(net, ids, names=["blocks.0.attn.hook_v", "blocks.0.attn.hook_z"])
    z, v = cache["blocks.0.attn.hook_z"], cache["blocks.0.attn.hook_v"]  # (B, T, H, d) each
    torch.testing.assert_close(z, v[:, :1].expand_as(z))


def test_hooks_stack_in_order_and_all_go_when_the_block_ends_even_on_an_error():
    net, ids = gpt(), torch.randint(32, (1, 6))
    seen = []

    def first(x, point):
        seen.append(("first", point.name))
        return x * 2

    def second(x, point):
        seen.append(("second", point.name))  # returns None: the activation goes on as the first left it

    with pytest.raises(RuntimeError, match="inside"), hooks(net, {"blocks.1.hook_resid_mid": [first, second]}):
        _, cache = run_with_cache(net, ids, names="blocks.1.hook_resid_mid")
        plain = net.hook_points()["blocks.1.hook_resid_mid"]
        assert seen == [("first", "blocks.1.hook_resid_mid"), ("second", "blocks.1.hook_resid_mid")]
        assert len(plain.fns) == 2
        raise RuntimeError("inside")
    assert not any(point.fns for point in net.hook_points().values())
    _, again = run_with_cache(net, ids, names="blocks.1.hook_resid_mid")
    torch.testing.assert_close(cache["blocks.1.hook_resid_mid"], 2 * again["blocks.1.hook_resid_mid"])


def test_a_misspelt_name_is_refused_before_any_hook_is_attached():
    net = gpt()
    typo = {"blocks.0.hook_resid_pre": lambda x, p: x, "blocks.0.attn.hook_patern": lambda x, p: x}
    message = r"'blocks.0.attn.hook_patern' is not a hook point of this network \(did you mean blocks.0.attn.hook_pat"
    with pytest.raises(KeyError, match=message):
        add_hooks(net, typo)
    assert not any(point.fns for point in net.hook_points().values())
    _, cache = run_with_cache(net, torch.randint(32, (1, 4)), names="hook_embed")
    with pytest.raises(KeyError, match="'hook_embedd' is not a hook point of this cache"):
        cache["hook_embedd"]


def test_each_configuration_lists_the_points_it_has():
    diff = gpt(mechanism="diff")
    rope = GPT(vocab_size=32, max_context=16, n_layer=1, d_model=32, attention={"n_head": 4}, position="rope")
    names = set(rope.hook_points())
    assert {"blocks.0.attn.hook_rot_q", "blocks.0.attn.hook_rot_k"} <= names and "hook_pos_embed" not in names
    assert "blocks.0.attn.hook_attn_scores" not in diff.hook_points()  # two score maps, one pattern
    toy = ToyModel(16, 8, d_model=16, n_layer=2, attention={"n_head": 4, "backend": "eager"})
    assert list(toy.hook_points())[:6] == ["hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre",
                                           "blocks.0.ln1.hook_scale", "blocks.0.ln1.hook_normalized",
                                           "blocks.0.attn.hook_q"]  # fmt: skip
    assert "blocks.1.hook_mlp_out" not in toy.hook_points() and "ln_final.hook_normalized" in toy.hook_points()
    assert "blocks.0.ln2.hook_scale" not in toy.hook_points()  # no MLP, no second LayerNorm


def test_latent_heads_cache_their_expanded_form_and_refuse_composition():
    latent = {"n_head": 4, "backend": "eager", "latent": {"kv_rank": 16, "rope_dim": 4}}
    net = GPT(vocab_size=32, max_context=16, n_layer=2, d_model=32, position="rope", attention=latent)
    _, cache = run_with_cache(net, torch.randint(32, (2, 6)))
    assert cache["blocks.0.attn.hook_q"].shape == (2, 6, 4, 8 + 4) and cache["blocks.0.attn.hook_v"].shape[-1] == 8
    with pytest.raises(ValueError, match="heads=mla has no per-head W_K, W_V"):
        composition_scores(net, "K")


def test_patching_a_run_into_itself_changes_nothing():
    net, ids = gpt(), torch.randint(32, (2, 8))

    def metric(logits):
        return logits[:, -1, 1].mean()

    with torch.no_grad():
        clean = float(metric(net(ids)[0]))
    assert patch_heads(net, ids, ids, metric) == pytest.approx(torch.full((2, 4), clean), abs=1e-5)
    with pytest.raises(ValueError, match="must have one shape"):
        patch_heads(net, ids, ids[:, :4], metric)


def test_a_layer_norm_s_points_hold_its_scale_and_what_comes_before_its_weight_and_bias():
    from andrea.models.layer_norm import LayerNorm

    norm = LayerNorm(8)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-1, 1)
    x = torch.randn(2, 5, 8) * 3 + 1
    seen: dict[str, torch.Tensor] = {}

    def record(name):
        return lambda t, p: seen.__setitem__(name, t)

    for name, point in norm.hook_points().items():
        point.add(record(name))
    out = norm(x)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (8,), norm.weight, norm.bias))  # hooks on
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(seen["hook_scale"], centred.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt())
    torch.testing.assert_close(seen["hook_normalized"] * norm.weight + norm.bias, out)
    norm.hook_normalized.add(lambda t, p: torch.zeros_like(t))  # an edit reaches the output: the bias alone
    torch.testing.assert_close(norm(x), norm.bias.expand_as(x))
