"""Every built-in mechanism, and latent heads, train through andrea-train. A mechanism on the induction task
gets its verdict, its role scores (rows that do not sum to 1 read as shares), the sink's mass per layer and
a parameter count that the estimate made before the run agrees with."""

import math

import pytest
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from tests.compose import compose_train, group_options

SHORT = ["experiment=induction", "data.num_train=512", "data.num_val=64", "trainer.max_epochs=1", "logger=none"]


DEFAULT_RUN = ("sigmoid", "diff")  # rows that do not sum to 1, and signed ones; the others under -m slow (3 s each)


@pytest.mark.parametrize(
    "mechanism",
    [pytest.param(m, marks=[] if m in DEFAULT_RUN else [pytest.mark.slow]) for m in group_options("mechanism")],
)
def test_each_mechanism_trains_on_induction_and_says_its_verdict(mechanism, tmp_path, capsys):
    result = train(compose_train(tmp_path, [*SHORT, f"mechanism={mechanism}"]))
    HydraConfig.instance().cfg = None
    printed = capsys.readouterr().out
    assert "verdict: needs an induction head in a layer >= 1:" in printed
    assert result.status == "completed" and result.val_loss is not None and math.isfinite(result.val_loss)
    assert result.config is not None and result.config["model"]["net"]["attention"]["mechanism"]["name"] == mechanism
    assert result.memory_estimate is not None and result.memory_estimate["parameters"] == result.parameters
    induction = result.roles["induction"]["score"]
    assert induction is not None and 0.0 <= induction <= 1.0  # a share, whatever the rows sum to
    assert result.first_token_mass is not None and len(result.first_token_mass) == 2
    assert all(math.isfinite(m) for m in result.first_token_mass)
    assert sorted(p.name for p in (tmp_path / "attention_maps").glob("*.png"))[:2] == [
        "layer0_step000000.png",
        "layer0_step000008.png",
    ]


def test_latent_heads_train_print_their_cache_and_generate_from_the_checkpoint(tmp_path, capsys):
    """andrea-train heads=mla on a GPT with RoPE: the summary prints the latent cache beside MHA's and MQA's,
    and the trained checkpoint generates through its latent cache the tokens it generates without one."""
    import torch

    from andrea.models.files.load import load_any
    from andrea.models.generate import generate
    from andrea.models.network import network

    overrides = [*SHORT, "model=andrea-tiny", "heads=mla", "position=rope"]
    result = train(compose_train(tmp_path, overrides))
    HydraConfig.instance().cfg = None
    out = capsys.readouterr().out
    assert "KV cache: 48 numbers a token (mla; MHA would keep 256, MQA 64)" in out
    assert result.kv_cache == {"heads": "mla", "kept": 2 * (16 + 8), "mha": 2 * 2 * 4 * 16, "mqa": 2 * 2 * 16}
    sizes = result.cache_bytes  # the sweep's table reads it; the summary leaves it to the KV cache line
    assert sizes is not None and [layer["bytes"] for layer in sizes["layers"]] == [24 * sizes["length"] * 4] * 2
    assert "cache of a" not in out
    net, _, _ = load_any(tmp_path / "checkpoints" / "last.ckpt")
    prompt = torch.randint(64, (2, 4), generator=torch.Generator().manual_seed(0))
    assert network(net).attention[0].head_kind == "mla"
    cached = generate(net, prompt, 12, temperature=0)
    assert torch.equal(cached, generate(net, prompt, 12, temperature=0, use_cache=False))
