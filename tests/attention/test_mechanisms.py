"""Each mechanism is its paper's formula: the block (projection, mechanism, backend, W_O) against the
formula written out here by hand; softmax is what it always was, bit for bit; a backend that does not
run a mechanism says so, naming those that do."""

import math

import pytest
import torch
from torch.nn import functional as F

from andrea.attention import MultiHeadSelfAttention, UnsupportedAttentionError, get_backend, mechanism_registry
from andrea.attention.masks import Causal
from andrea.attention.mechanisms.gated import Gated
from andrea.attention.mechanisms.softmax import attention_weights
from andrea.attention.shapes import weighted_values
from andrea.models.toy import ToyModel

D, H, T = 32, 4, 7
SERVED = {  # mechanism -> the built-in backends that run it on CPU (flex: forward only)
    "softmax": ["naive", "eager", "sdpa"],
    "gated": ["naive", "eager", "sdpa"],
    "qknorm": ["naive", "eager", "sdpa"],
    "sigmoid": ["naive", "eager"],
    "sink": ["naive", "eager"],
    "softcap": ["naive", "eager"],
    "diff": ["naive", "eager"],
    "stickbreaking": ["naive", "eager"],
    "fox": ["naive", "eager", "sdpa"],
}


def _block(mechanism, backend="eager", **kwargs):
    torch.manual_seed(0)
    block = MultiHeadSelfAttention(D, H, backend=backend, mechanism=mechanism, max_context=16, **kwargs)
    with torch.no_grad():
        for p in block.mechanism.parameters():
            p.copy_(torch.randn_like(p) * 0.5)  # no parameter at its initial value
    return block


def _heads(block, x):
    """q, k, v (B, H, T, d) straight from the fused projection."""
    return block.heads.split_qkv(block.qkv(x), block.head_dim)


def _causal_softmax(s):
    return s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)


def _out(block, z):
    """concat_h(z_h) W_O."""
    B = z.shape[0]
    return block.proj(z.transpose(1, 2).reshape(B, T, D))


def test_every_builtin_is_registered():
    assert set(SERVED) <= set(mechanism_registry.names())


def test_softmax_is_what_it_always_was_bit_for_bit():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, H, T, 8), torch.randn(2, H, T, 8), torch.randn(2, H, T, 8)
    before = weighted_values(attention_weights(q, k, Causal(), 8**-0.5), v)  # the contract's own math
    for backend in ("eager", "naive"):
        implicit, _ = get_backend(backend)(q, k, v, Causal())
        named, _ = get_backend(backend)(q, k, v, Causal(), mechanism=mechanism_registry.load("softmax")(
            n_head=H, head_dim=8, d_model=D, max_context=T))  # fmt: skip
        assert torch.equal(implicit, named)
    assert torch.equal(get_backend("eager")(q, k, v, Causal())[0], before)
    x = torch.randn(2, T, D)
    assert torch.equal(_block(None)(x)[0], _block("softmax")(x)[0])
    assert not list(_block("softmax").mechanism.parameters())  # checkpoints hold no new keys


@pytest.mark.parametrize("backend", ["naive", "eager"])
def test_sigmoid_is_its_formula(backend):
    block, x = _block("sigmoid", backend), torch.randn(2, T, D)
    q, k, v = _heads(block, x)
    b = -math.log(16)  # the default: -log(max_context)
    s = q @ k.transpose(-2, -1) / math.sqrt(8) + b
    a = torch.sigmoid(s) * torch.ones(T, T).tril()
    y, w = block(x, return_weights=True)
    torch.testing.assert_close(w, a)
    torch.testing.assert_close(y, _out(block, a @ v))
    assert not torch.allclose(w.sum(-1), torch.ones(2, H, T))  # rows do not sum to 1
    assert _block({"name": "sigmoid", "bias": -1.0}).mechanism.bias == -1.0


@pytest.mark.parametrize("backend", ["naive", "eager"])
@pytest.mark.parametrize("learned", [True, False])
def test_sink_is_its_formula(backend, learned):
    block, x = _block({"name": "sink", "learned": learned}, backend), torch.randn(2, T, D)
    q, k, v = _heads(block, x)
    s = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
    sink = block.mechanism.sink.view(1, H, 1, 1)
    a = s.exp() / (sink.exp() + s.exp().sum(-1, keepdim=True))  # exp(s) / (exp(sink_h) + sum exp(s))
    if not learned:
        assert torch.equal(block.mechanism.sink, torch.zeros(H))  # off by one: 1 + sum exp(s)
        assert not list(block.mechanism.parameters())
    y, w = block(x, return_weights=True)
    torch.testing.assert_close(w, a)
    torch.testing.assert_close(y, _out(block, a @ v))
    assert (w.sum(-1) < 1).all()


@pytest.mark.parametrize("backend", ["naive", "eager"])
def test_softcap_is_its_formula(backend):
    block, x = _block({"name": "softcap", "cap": 2.0}, backend), 5 * torch.randn(2, T, D)
    q, k, v = _heads(block, x)
    s = q @ k.transpose(-2, -1) / math.sqrt(8)
    assert s.abs().max() > 2  # scores the cap bites on
    a = _causal_softmax(2.0 * torch.tanh(s / 2.0))
    y, w = block(x, return_weights=True)
    torch.testing.assert_close(w, a)
    torch.testing.assert_close(y, _out(block, a @ v))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("backend", ["naive", "eager", "sdpa"])
def test_gated_is_its_formula(backend, bias):
    block, x = _block("gated", backend, bias=bias), torch.randn(2, T, D)
    q, k, v = _heads(block, x)
    z = _causal_softmax(q @ k.transpose(-2, -1) / math.sqrt(8)) @ v  # (B, H, T, d)
    gate = x @ block.mechanism.gate.weight.T  # X W_θ: (B, T, H·d)
    if bias:
        gate = gate + block.mechanism.gate.bias
    z = z * torch.sigmoid(gate).view(2, T, H, 8).transpose(1, 2)
    torch.testing.assert_close(block(x)[0], _out(block, z))


@pytest.mark.parametrize("attention_bias", [False, True])
def test_the_gate_has_a_bias_where_the_model_s_projections_do_as_in_qwen3_next(attention_bias):
    """Qwen3-Next (transformers' own module) computes its gate in q_proj, which has a bias only with
    attention_bias; andrea's W_θ follows model.net.bias the same way, and mechanism.gate_bias overrides it."""
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention

    config = Qwen3NextConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=H, head_dim=8,
                             attention_bias=attention_bias)  # fmt: skip
    theirs = Qwen3NextAttention(config, layer_idx=3).q_proj  # queries and gates, (H·2d) outputs
    ours = MultiHeadSelfAttention(D, H, mechanism="gated", bias=attention_bias).mechanism
    overridden = MultiHeadSelfAttention(D, H, mechanism={"name": "gated", "gate_bias": not attention_bias}).mechanism
    assert isinstance(ours, Gated) and isinstance(overridden, Gated)
    assert (theirs.bias is not None) == (ours.gate.bias is not None) == attention_bias
    assert sum(p.numel() for p in ours.parameters()) == D * H * 8 + int(attention_bias) * H * 8
    assert (overridden.gate.bias is not None) == (not attention_bias)


@pytest.mark.parametrize("position", ["none", "rope"])
@pytest.mark.parametrize("backend", ["naive", "eager", "sdpa"])
def test_qknorm_normalises_before_rope(backend, position):
    block, x = _block("qknorm", backend, position=position), torch.randn(2, T, D)
    q, k, v = _heads(block, x)

    def rms(t, gain):
        return t / t.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * gain

    q, k = rms(q, block.mechanism.q_norm.weight), rms(k, block.mechanism.k_norm.weight)
    if block.qkv.rope is not None:
        q, k = block.qkv.rope(q), block.qkv.rope(k)
    z = _causal_softmax(q @ k.transpose(-2, -1) / math.sqrt(8)) @ v
    torch.testing.assert_close(block(x)[0], _out(block, z))


@pytest.mark.parametrize("backend", ["naive", "eager"])
@pytest.mark.parametrize("layer", [0, 3])
def test_diff_is_its_formula(backend, layer):
    block, x = _block("diff", backend, layer=layer, n_layer=4), torch.randn(2, T, D)
    m = block.mechanism
    lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer)  # depth l = layer + 1: 0.8 - 0.6 exp(-0.3 (l - 1))
    assert m.lambda_init == pytest.approx(lambda_init)
    lam = torch.exp(m.lambda_q1 @ m.lambda_k1) - torch.exp(m.lambda_q2 @ m.lambda_k2) + lambda_init
    q, k, v = _heads(block, x)
    (q1, q2), (k1, k2) = q.chunk(2, -1), k.chunk(2, -1)
    s = 1 / math.sqrt(4)  # each map's queries have d/2 = 4 channels
    a = _causal_softmax(q1 @ k1.transpose(-2, -1) * s) - lam * _causal_softmax(q2 @ k2.transpose(-2, -1) * s)
    z = (1 - lambda_init) * F.rms_norm(a @ v, (8,), m.norm.weight, eps=1e-5)  # each head on its own
    y, w = block(x, return_weights=True)
    torch.testing.assert_close(w, a)
    torch.testing.assert_close(y, _out(block, z))


def _rope_as_complex(x, start=0):
    """RoPE written on its own, as complex numbers: channel pair (c, c + m/2) of each m-channel head is
    x_c + i·x_(c+m/2), turned by position · 10000^(-2c/m). x (B, H, T, m)."""
    m, positions = x.shape[-1], torch.arange(start, start + x.shape[2], dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, m, 2, dtype=torch.float64) / m)  # (m/2,)
    turn = torch.polar(torch.ones(len(positions), m // 2, dtype=torch.float64), torch.outer(positions, theta))
    z = torch.complex(*x.double().chunk(2, dim=-1)) * turn  # (B, H, T, m/2)
    return torch.cat((z.real, z.imag), dim=-1).float()


@pytest.mark.parametrize("backend", ["naive", "eager"])
def test_diff_with_rope_rotates_each_half_as_a_head_of_its_own(backend):
    """The paper's code views each head's q and k as two half-heads of d/2 channels and rotates each on its own:
    each map's scores then depend on i - j only (the same token at every position: every diagonal constant)."""
    block = _block("diff", backend, position="rope")
    seen: dict[str, torch.Tensor] = {}
    for name in ("hook_q", "hook_k", "hook_rot_q", "hook_rot_k"):
        block.hook_points()[name].add(lambda x, point, name=name: seen.__setitem__(name, x.transpose(1, 2)))
    x = torch.randn(1, 1, D).expand(2, T, D)  # one token at every position
    _, w = block(x, return_weights=True)
    assert seen["hook_rot_q"].shape == (2, H, T, 8)  # (B, H, T, d) as (B, T, H, d) for the hooks, halves side by side
    m = block.mechanism
    lam = torch.exp(m.lambda_q1 @ m.lambda_k1) - torch.exp(m.lambda_q2 @ m.lambda_k2) + m.lambda_init
    maps = []
    for half in (slice(0, 4), slice(4, 8)):
        q, k = seen["hook_rot_q"][..., half], seen["hook_rot_k"][..., half]  # (B, H, T, d/2): one half-head
        torch.testing.assert_close(q, _rope_as_complex(seen["hook_q"][..., half]))
        torch.testing.assert_close(k, _rope_as_complex(seen["hook_k"][..., half]))
        scores = q @ k.transpose(-2, -1) / math.sqrt(4)  # (B, H, T, T)
        for offset in range(-T + 1, T):  # score(i, j) depends on i - j only
            diagonal = scores.diagonal(offset, -2, -1)
            torch.testing.assert_close(diagonal, diagonal[..., :1].expand_as(diagonal), atol=1e-5, rtol=1e-5)
        maps.append(_causal_softmax(scores))
    torch.testing.assert_close(w, maps[0] - lam * maps[1])


def test_diff_needs_an_even_head_dim():
    with pytest.raises(ValueError, match="mechanism=diff splits each head in two halves: head_dim=5 must be even"):
        MultiHeadSelfAttention(20, 4, backend="eager", mechanism="diff")


@pytest.mark.parametrize(
    ("backend", "mechanism", "message"),
    [
        ("sdpa", "sigmoid", "attention backend 'sdpa' does not run mechanism 'sigmoid'; use attention backend "),
        ("sdpa", "diff", "attention backend 'sdpa' does not run mechanism 'diff'; use attention backend "),
    ],
)
def test_a_backend_refuses_a_mechanism_it_does_not_run(backend, mechanism, message):
    with pytest.raises(UnsupportedAttentionError, match=message) as refused:
        MultiHeadSelfAttention(D, H, backend=backend, mechanism=mechanism)
    assert "eager" in str(refused.value) and "naive" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("softmaks", "unknown attention mechanism 'softmaks'; available: "),
        ({"name": "sigmoid", "bais": 1.0}, "mechanism 'sigmoid' takes bias; got mechanism.bais"),
        ({"name": "sigmoid", "bias": "abc"}, "mechanism.bias='abc' must be a finite number"),
        ({"name": "softcap", "cap": 0}, "mechanism.cap=0 must be a finite number > 0"),
        ({"name": "sink", "learned": "yes"}, "mechanism.learned='yes' must be true or false"),
        ({"name": "gated", "bias": 1}, "mechanism 'gated' takes gate_bias; got mechanism.bias"),
        ({"name": "gated", "gate_bias": 1}, "mechanism.gate_bias=1 must be true, false or null"),
    ],
)
def test_bad_mechanism_settings_are_refused_by_name(spec, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadSelfAttention(D, H, backend="eager", mechanism=spec)


@pytest.mark.parametrize(("mechanism", "backend"), [(m, b) for m, backends in SERVED.items() for b in backends])
def test_the_kv_cache_gives_what_the_full_forward_gives(mechanism, backend):
    torch.manual_seed(0)
    model = ToyModel(vocab_size=11, max_context=12, d_model=D, n_layer=2,
                     attention={"n_head": H, "backend": backend, "mechanism": mechanism, "mask": "causal"})  # fmt: skip
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        idx = torch.randint(0, 11, (2, 9))
        full, _ = model(idx)
        cache = model.new_cache()
        steps = [model(idx[:, :5], cache=cache)[0]] + [model(idx[:, i : i + 1], cache=cache)[0] for i in range(5, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_a_refusal_advises_only_backends_that_run_the_whole_call():
    """triton on CPU (no interpreter) refuses; the backends it advises must run the block's mechanism and mask too:
    sink runs on eager, flex and naive, never on sdpa (softmax only)."""
    block = MultiHeadSelfAttention(D, H, backend="triton", mechanism="sink", max_context=16)
    with pytest.raises(UnsupportedAttentionError, match="attention backend 'triton' runs on CUDA GPUs") as refused:
        block(torch.randn(1, T, D))
    advised = str(refused.value).split("use attention backend ")[1].split(", or")[0].split(" / ")
    assert {"eager", "naive", "flex"} <= set(advised) and "sdpa" not in advised
    plain = MultiHeadSelfAttention(D, H, backend="triton", max_context=16)
    with pytest.raises(UnsupportedAttentionError, match="use attention backend .*sdpa"):
        plain(torch.randn(1, T, D))  # softmax: sdpa runs it


def test_a_mechanism_sees_the_layers_input_before_the_scores():
    """A mechanism's `project` gets the layer's input x (B, T, D) with q and k, before any score: a gate computed
    from x (the Forgetting Transformer's) can act on the scores. Here the keys are scaled by sigmoid(x·w) per
    token, and the weights are the softmax of those scores, as written out by hand."""
    from andrea.attention.mechanisms.softmax import Softmax

    class KeyGate(Softmax):
        name = "key_gate"

        def __init__(self, **sizes):
            super().__init__(**sizes)
            self.w = torch.nn.Parameter(torch.randn(self.d_model))

        def project(self, q, k, x):
            return q, k * torch.sigmoid(x @ self.w)[:, None, :, None]  # (B, 1, T, 1): one gate per key token

    torch.manual_seed(0)
    gate = KeyGate(**_sizes())
    block = MultiHeadSelfAttention(D, H, backend="eager", mechanism=gate, max_context=16)
    x = torch.randn(2, T, D)
    q, k, v = _heads(block, x)
    k = k * torch.sigmoid(x @ gate.w)[:, None, :, None]
    z = _causal_softmax(q @ k.transpose(-2, -1) / math.sqrt(D // H)) @ v
    torch.testing.assert_close(block(x)[0], _out(block, z))


def _sizes():
    return dict(n_head=H, head_dim=D // H, d_model=D, max_context=16)
