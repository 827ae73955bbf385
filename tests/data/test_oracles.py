"""Tasks where attention is the only route: a briefly trained model grows the oracle head.

Chance levels (uniform causal attention over T=32): previous-token ~0.13,
induction ~0.1. Measured here with these very runs (256 steps each, ~5 s; the
definitions of docs/head_roles.md): the best head's previous-token score on
lookback(k=1) is 0.95 (val loss 0.015), and layer 1's best induction score 0.97
(val loss 0.005), on every backend that trains on CPU. The thresholds leave a
margin; the run's own verdict (found at >= 0.5) must agree.
"""

import pytest

from andrea.attention import backend_registry
from andrea.train.pipeline import train
from tests.compose import compose_train

# eager in the default suite; every other backend that trains on CPU (plugins too) under `-m slow`:
# the conformance kit has already proven their gradients equal to naive's. Not triton: on CPU it runs
# under Triton's interpreter, which takes minutes for one of these runs (its parity is the kit's).
TRAINABLE = [
    pytest.param(name, marks=() if name == "eager" else pytest.mark.slow)
    for name in backend_registry.names()
    if backend_registry.load(name).capabilities.cpu_backward and name != "triton"
]


def best(result, role, layer=None):
    scores = {k: v for k, v in result.head_roles.items() if k.startswith(f"heads/{role}/")}
    if layer is not None:
        scores = {k: v for k, v in scores.items() if f"/L{layer}H" in k}
    return max(scores.values())


@pytest.mark.parametrize(  # the default run's induction oracle grows a previous-token head too (its layer 0)
    "backend", [pytest.param(p.values[0], marks=pytest.mark.slow) for p in TRAINABLE]
)
def test_lookback_grows_a_previous_token_head(backend, tmp_path):
    result = train(compose_train(tmp_path, ["experiment=lookback", f"attention={backend}", "logger=none"]))
    assert result.val_loss is not None and result.verdict is not None
    assert result.val_loss < 0.1
    assert best(result, "previous_token") > 0.8
    assert result.verdict["appeared"] is True and result.verdict["role"] == "previous_token"


@pytest.mark.parametrize("backend", TRAINABLE)
def test_induction_grows_an_induction_head(backend, tmp_path, request):
    if backend == "eager":  # the suite's shared induction run is this very run
        result, _ = request.getfixturevalue("induction_run")
    else:
        result = train(compose_train(tmp_path, ["experiment=induction", f"attention={backend}", "logger=none"]))
    assert result.val_loss is not None and result.verdict is not None
    assert result.val_loss < 0.1
    assert best(result, "induction", layer=1) > 0.8
    assert best(result, "induction", layer=1) > 3 * best(result, "induction", layer=0)  # it is layer 1's job
    assert result.verdict["appeared"] is True and result.verdict["best"].startswith("L1")
