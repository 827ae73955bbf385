"""Head-role metrics on weights whose answer is known, and across backends."""

import math

import pytest
import torch

from andrea.attention import get_backend
from andrea.metrics import AttentionEntropy, FirstTokenScore, InductionScore, PreviousTokenScore
from andrea.models.toy import ToyModel

T = 6


def causal_uniform(batch=1, heads=1):
    return torch.ones(T, T).tril().div(torch.arange(1, T + 1).unsqueeze(1)).expand(batch, heads, T, T)


def one_hot_rows(targets):
    """Head weights with all mass on key targets[t] for query t."""
    return torch.nn.functional.one_hot(torch.tensor(targets), T).float().view(1, 1, T, T)


def score(metric_class, weights, ids=None):
    ids = torch.arange(T).view(1, T) if ids is None else ids
    metric = metric_class(n_layer=len(weights), n_head=weights[0].shape[1])
    metric.update(weights, ids)
    return metric.compute()


def test_previous_token_head_scores_one():
    assert score(PreviousTokenScore, [one_hot_rows([0, 0, 1, 2, 3, 4])]).item() == pytest.approx(1.0)
    assert score(PreviousTokenScore, [one_hot_rows([0, 1, 2, 3, 4, 5])]).item() == pytest.approx(0.0)


def test_first_token_and_uniform_values():
    assert score(FirstTokenScore, [one_hot_rows([0] * T)]).item() == pytest.approx(1.0)
    uniform = [causal_uniform()]
    chance = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    assert score(PreviousTokenScore, uniform).item() == pytest.approx(chance)
    assert score(FirstTokenScore, uniform).item() == pytest.approx(chance)


def test_entropy():
    assert score(AttentionEntropy, [one_hot_rows([0] * T)]).item() == pytest.approx(0.0, abs=1e-6)
    expected = sum(math.log(t + 1) for t in range(T)) / T
    assert score(AttentionEntropy, [causal_uniform()]).item() == pytest.approx(expected)


def test_induction_score():
    ids = torch.tensor([[7, 8, 9, 7, 8, 9]])  # period 3: query t should look at t - 2
    perfect = one_hot_rows([0, 0, 0, 1, 2, 3])
    assert score(InductionScore, [perfect], ids).item() == pytest.approx(1.0)  # rows 3..5 are defined
    assert score(InductionScore, [one_hot_rows([0, 1, 2, 3, 4, 5])], ids).item() == pytest.approx(0.0)


def test_per_layer_and_head_shapes():
    weights = [causal_uniform(batch=2, heads=3), one_hot_rows([0, 0, 1, 2, 3, 4]).expand(2, 3, T, T)]
    values = score(PreviousTokenScore, weights, torch.arange(T).expand(2, T))
    assert values.shape == (2, 3)
    assert (values[1] == 1).all() and (values[0] < 0.5).all()


def test_rejects_non_square_weights():
    with pytest.raises(ValueError, match="need square"):
        score(PreviousTokenScore, [torch.zeros(1, 1, 2, T)])


def test_backends_give_the_same_metrics():
    torch.manual_seed(0)
    attention = dict(n_head=4, n_kv_head=2, mask="causal")
    reference = ToyModel(64, 16, d_model=32, n_layer=2, attention={**attention, "backend": "naive"})
    ids = torch.randint(64, (3, 16))
    values = {}
    for backend in ("naive", "eager", "sdpa", "flex"):
        model = ToyModel(64, 16, d_model=32, n_layer=2, attention={**attention, "backend": backend})
        model.load_state_dict(reference.state_dict())
        with torch.no_grad():
            _, weights = model(ids, return_weights=True)
        values[backend] = [
            score(m, weights, ids) for m in (AttentionEntropy, PreviousTokenScore, FirstTokenScore, InductionScore)
        ]
        assert get_backend(backend).name == backend
    for backend, scores in values.items():
        for got, expected in zip(scores, values["naive"], strict=True):
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5, msg=backend)
