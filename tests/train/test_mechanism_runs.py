"""Every built-in mechanism trains through andrea-train on the induction task and gets its verdict, its
role scores (rows that do not sum to 1 read as shares), the sink's mass per layer and a parameter
count that the estimate made before the run agrees with."""

import math

import pytest
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from tests.compose import compose_train, group_options

SHORT = ["experiment=induction", "data.num_train=512", "data.num_val=64", "trainer.max_epochs=1", "logger=none"]


@pytest.mark.parametrize("mechanism", group_options("mechanism"))
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
