"""The ANDREA GPT family: pinned parameter counts (docs/spec.md §3-4), every backend, GPT-2 initialisation."""

import math
from typing import cast

import pytest
import torch

from andrea.models.gpt import GPT

from ..attention.helpers import BACKENDS, HEADS


def test_andrea_120m_parameter_count():
    with torch.device("meta"):  # shapes only: counted without allocating 124M parameters
        model = GPT(vocab_size=50257, max_context=1024, n_layer=12, d_model=768, attention=dict(n_head=12))
    attention = sum(p.numel() for block in model._blocks() for p in block.attention.parameters())
    assert sum(p.numel() for p in model._blocks()[0].attention.parameters()) == 4 * 768**2 == 2_359_296
    assert attention == 28_311_552  # docs/spec.md §3: 28.3M over 12 layers, about a quarter of the model
    assert model.num_parameters() == 124_337_664
    assert model.lm_head.weight is model.embed.token.weight  # tied, counted once


def test_andrea_12m_parameter_count():
    model = GPT(vocab_size=50257, max_context=256, n_layer=6, d_model=192, attention=dict(n_head=6))
    assert model._blocks()[0].attention.head_dim == 32
    assert model.num_parameters() == 12_355_200


def tiny(backend="naive", heads="mha", **kwargs):
    n_head, n_kv_head = HEADS[heads]
    attention = dict(n_head=n_head, n_kv_head=n_kv_head, backend=backend, mask="causal")
    return GPT(**{**dict(vocab_size=97, max_context=16, n_layer=2, d_model=32, attention=attention), **kwargs})


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_gives_the_same_logits(backend, heads):
    torch.manual_seed(0)
    reference = tiny("naive", heads)
    model = tiny(backend, heads)
    model.load_state_dict(reference.state_dict())
    idx = torch.randint(97, (2, 12))
    with torch.no_grad():
        (logits, weights), (expected, expected_weights) = (
            model(idx, return_weights=True),
            reference(idx, return_weights=True),
        )
    assert logits.shape == (2, 12, 97) and len(weights) == 2 and weights[0].shape == (2, 4, 12, 12)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights[1], expected_weights[1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "flex"])
def test_every_parameter_learns(backend):
    model = tiny(backend, "gqa")
    idx = torch.randint(97, (2, 12))
    logits, _ = model(idx)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.roll(-1, 1).flatten()).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_gpt2_initialisation():
    torch.manual_seed(0)
    model = GPT(vocab_size=1000, max_context=64, n_layer=8, d_model=256, attention=dict(n_head=4))
    assert model.embed.token.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model._blocks()[0].mlp.fc.weight.std().item() == pytest.approx(0.02, rel=0.05)
    residual = 0.02 / math.sqrt(2 * 8)
    assert model._blocks()[3].mixer.proj.weight.std().item() == pytest.approx(residual, rel=0.05)
    assert model._blocks()[3].mlp.proj.weight.std().item() == pytest.approx(residual, rel=0.05)


def test_causal_language_model():
    """A later token never changes an earlier logit."""
    model = tiny("sdpa").eval()
    idx = torch.randint(97, (1, 12))
    changed = idx.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 97
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0][:, :8], model(changed)[0][:, :8])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(position="sinusoidal"), "model.net.position='sinusoidal' must be one of learned, rope, alibi, none"),
        (dict(n_layer=0), "model.net.n_layer=0 must be a positive integer"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tiny(**kwargs)


@pytest.mark.parametrize("position", ["rope", "alibi", "none"])
def test_positions_inside_attention_add_no_parameters(position):
    learned = tiny("sdpa").num_parameters()
    other = tiny("sdpa", position=position)
    assert other.embed.position is None and other.num_parameters() == learned - 16 * 32  # max_context · d_model
    idx = torch.randint(97, (1, 12))
    changed = idx.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 97
    with torch.no_grad():  # still causal: a later token never changes an earlier logit
        torch.testing.assert_close(other.eval()(idx)[0][:, :8], other(changed)[0][:, :8])


def test_flops_per_token_matches_the_formula():
    with torch.device("meta"):  # parameters counted, none allocated or initialised
        model = GPT(vocab_size=50257, max_context=1024, n_layer=12, d_model=768, attention=dict(n_head=12))
    n = 124_337_664 - 1024 * 768  # without position embeddings
    assert model.flops_per_token(1024) == 6 * n + 12 * 12 * 768 * 1024


def test_weight_decay_groups():
    from functools import partial

    from andrea.train.lit import LanguageModelModule

    module = LanguageModelModule(tiny("sdpa"), optimizer=partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.1))
    optimizer = module.configure_optimizers()
    assert isinstance(optimizer, torch.optim.Optimizer)  # no scheduler: the optimizer alone
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert sum(p.numel() for g in (decay, no_decay) for p in g["params"]) == cast(GPT, module.net).num_parameters()


def test_compiled_module_keeps_plain_weight_names():
    from functools import partial

    from andrea.train.lit import LanguageModelModule

    module = LanguageModelModule(tiny("sdpa"), optimizer=partial(torch.optim.AdamW), compile=True)
    assert all(key.startswith("net.") for key in module.state_dict() if "net" in key)
    assert not any("_orig_mod" in key or "_forward_net" in key for key in module.state_dict())


@pytest.mark.slow  # reason: inductor compiles the forward and backward twice on CPU (~40 s)
def test_a_compiled_module_trains_on_a_second_sequence_length():
    """A new input shape (a sweep over data.seq_len in one process, a shorter batch) compiles a graph
    of its own: with torch's automatic dynamic shapes, the second shape's backward would trace the
    sparse lookup gradient symbolically, which inductor's fake tensors cannot run."""
    from functools import partial

    from andrea.train.lit import LanguageModelModule

    torch.manual_seed(0)
    net = tiny("sdpa")
    module = LanguageModelModule(net, optimizer=partial(torch.optim.AdamW), compile=True)
    for seq_len in (12, 8):
        idx = torch.randint(97, (2, seq_len))
        logits = module(idx)  # (B, T, V)
        assert logits.shape == (2, seq_len, 97)
        logits.square().mean().backward()
        assert net.embed.token.weight.grad is not None and torch.isfinite(net.embed.token.weight.grad).all()


def test_the_tied_embedding_gets_the_same_dense_gradient_from_its_rows():
    """The token lookup hands back only its rows (sparse_grad); the head's dense gradient takes them:
    the sum equals the dense lookup's, and the optimizer sees one dense (V, D) gradient."""
    torch.manual_seed(0)
    sparse, dense = tiny(), tiny()
    dense.load_state_dict(sparse.state_dict())
    dense.embed.sparse_grad = False
    idx = torch.randint(97, (2, 12))
    for model in (sparse, dense):
        logits, _ = model(idx)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.roll(-1, 1).flatten()).backward()
    grad = sparse.embed.token.weight.grad
    assert sparse.embed.sparse_grad and grad is not None and grad.layout == torch.strided
    torch.testing.assert_close(grad, dense.embed.token.weight.grad, atol=1e-7, rtol=1e-6)
    torch.optim.AdamW(sparse.parameters(), fused=True).step()  # a fused AdamW refuses sparse gradients
