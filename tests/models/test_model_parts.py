"""The parts of the field's architectures as GPT settings (andrea.models.gpt, norms, mlp): each computes what its
formula says, a model of any combination is counted by the memory estimate exactly as built, the defaults keep
GPT-2's network, and a value that cannot be is refused by its key before anything is built."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from torch.nn import functional as F

from andrea.models import memory
from andrea.models.files.schema import parse
from andrea.models.gpt import GPT
from andrea.models.mlp import MLP
from andrea.models.norms import RMSNorm
from andrea.train.config import ConfigError, validate
from tests.compose import QUICK, compose_train

SMALL: dict[str, Any] = dict(
    vocab_size=50, max_context=16, n_layer=2, d_model=32, attention={"n_head": 4}, position="rope"
)
COMBINATIONS = [  # every value of every part at least once, beside the others
    dict(activation=a, norm=n, norm_place=p, tie_embeddings=t, bias=b, d_mlp=d)
    for (a, n), (p, t, b, d) in zip(
        itertools.product(["gelu", "swiglu", "geglu"], ["layernorm", "rmsnorm", "gemma_rmsnorm", "none"]),
        itertools.cycle(itertools.product(["pre", "post", "both"], [True, False], [False, True], [None, 48])),
        strict=False,
    )
] + [dict(attention={"n_head": 4, "n_kv_head": 2, "head_dim": 12}, bias=bias) for bias in (False, True)]  # heads 12
# wide at d_model 32: W_Q, W_K, W_V and W_O sized by H·head_dim, not d_model


@pytest.mark.parametrize("parts", COMBINATIONS, ids=lambda p: "-".join(str(v) for v in p.values()))
def test_the_memory_estimate_counts_each_combination_as_built(parts):
    config = {"_target_": "andrea.models.gpt.GPT", **SMALL, **parts}
    net = GPT(**SMALL | parts)
    assert memory.parameters(parse(config, "test", "model.net")) == net.num_parameters()


def test_the_norms_compute_their_formulas():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    rms, gemma = RMSNorm(8, eps=1e-6), RMSNorm(8, eps=1e-6, offset=True)
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
        gemma.weight.uniform_(-0.5, 0.5)
    normalized = x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()
    torch.testing.assert_close(rms(x), (normalized.float() * rms.weight).double())
    torch.testing.assert_close(gemma(x), (normalized.float() * (1 + gemma.weight)).double())
    assert gemma.weight.detach().abs().max() > 0 and RMSNorm(8, offset=True).weight.eq(0).all()  # Gemma's gain: 1 + 0
    assert rms(x.half()).dtype == torch.float16  # computed in float32, returned in the input's dtype


def test_a_gated_mlp_multiplies_the_activated_gate_by_its_linear_half():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    for activation, act in (("swiglu", F.silu), ("geglu", lambda h: F.gelu(h, approximate="tanh"))):
        mlp = MLP(8, 12, 0.0, False, activation)
        assert mlp.gate is not None and set(mlp.hook_points()) == {"hook_pre", "hook_post", "hook_pre_linear"}
        torch.testing.assert_close(mlp(x), mlp.proj(act(mlp.gate(x)) * mlp.fc(x)))


def test_norms_sit_before_after_or_both_and_the_head_ties_only_when_asked():
    torch.manual_seed(0)
    post = GPT(**SMALL, norm="rmsnorm", norm_place="post", tie_embeddings=False)
    block = post.blocks[0]
    assert block.ln_1 is None and block.ln_2 is None and block.ln_1_post is not None
    x = torch.randn(1, 6, 32)
    mixed = x + block.ln_1_post(block.mixer(x)[0])
    torch.testing.assert_close(block(x)[0], mixed + block.ln_2_post(block.mlp(mixed)))
    assert post.lm_head.weight is not post.embed.token.weight and not post.embed.sparse_grad
    both = GPT(**SMALL, norm_place="both")
    assert {"ln1.hook_scale", "ln1_post.hook_scale", "ln2.hook_scale", "ln2_post.hook_scale"} <= {
        name.split(".", 2)[-1] for name in both.hook_points()
    }
    tied = GPT(**SMALL)
    assert tied.lm_head.weight is tied.embed.token.weight


def test_embeddings_scale_and_logits_soft_cap():
    torch.manual_seed(0)
    plain = GPT(**SMALL, embed_scale=False)
    scaled = GPT(**SMALL, embed_scale=True, logit_softcap=2.0)
    scaled.load_state_dict(plain.state_dict())
    seen: list[torch.Tensor] = []
    for net in (plain, scaled):
        net.hook_points()["blocks.0.hook_resid_pre"].add(lambda x, point: seen.append(x))
    ids = torch.randint(0, 50, (1, 7))
    plain(ids)
    logits, _ = scaled(ids)
    torch.testing.assert_close(seen[1], seen[0] * 32**0.5)
    assert logits.abs().max() < 2.0


def test_the_initialisation_takes_its_std_or_one_over_sqrt_d():
    torch.manual_seed(0)
    for init_std, std in ((0.05, 0.05), (None, 32**-0.5)):
        net = GPT(**SMALL, d_mlp=256, init_std=init_std)
        weights = net.state_dict()
        fc, proj = weights["blocks.0.mlp.fc.weight"], weights["blocks.0.mlp.proj.weight"]
        assert abs(fc.std().item() / std - 1) < 0.1  # 8,192 draws: within 10% of the std asked for
        assert abs(proj.std().item() / (std / 2) - 1) < 0.1  # written into the residual stream: / sqrt(2 · 2)


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.net.norm=batchnorm", "model.net.norm='batchnorm' must be one of layernorm, rmsnorm, gemma_rmsnorm"),
        ("model.net.norm_place=middle", "model.net.norm_place='middle' must be one of pre, post, both"),
        ("model.net.logit_softcap=0", "model.net.logit_softcap=0"),
        ("model.net.d_mlp=0", "model.net.d_mlp=0"),
    ],
)
def test_a_part_that_cannot_be_is_refused_by_its_key(override, message, tmp_path):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        validate(compose_train(tmp_path, [*QUICK, "model=andrea-tiny", override]))


def test_the_toy_model_drops_out_as_the_gpt_does():
    """model.net.dropout on the toy model: its embeddings and each attention layer's weights and output."""
    from andrea.models.toy import ToyModel

    torch.manual_seed(0)
    toy = ToyModel(50, 16, attention={"n_head": 4}, dropout=0.2)
    ids = torch.randint(0, 50, (2, 16))
    assert not torch.equal(toy(ids)[0], toy(ids)[0])  # training: a fresh mask each call
    toy.eval()
    assert torch.equal(toy(ids)[0], toy(ids)[0])
    assert toy.dropout.p == 0.2 and toy.mixers[0].dropout.p == 0.2  # type: ignore[attr-defined]
