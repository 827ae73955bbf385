"""Head-role metrics pinned on hand-made patterns whose answer is known (docs/head_roles.md),
TransformerLens's figures beside them, the verdicts, and the same numbers from every backend."""

import math

import pytest
import torch

from andrea.attention import get_backend
from andrea.data.tasks import Pattern
from andrea.lens import transformer_lens as tl
from andrea.lens.head_roles import (
    AttentionEntropy,
    FirstTokenScore,
    InductionScore,
    LookbackScore,
    PreviousTokenScore,
    first_token_mass,
)
from andrea.lens.verdict import describe, score_heads, summary, verdict
from andrea.models.toy import ToyModel

T = 8
DISTINCT = torch.arange(T).view(1, T)  # 0 1 2 3 4 5 6 7
REPEATED = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])  # a block of 4, twice
EQUAL = torch.full((1, T), 5)  # the repetition task: every token the same


def one_hot_rows(targets):
    """(1, 1, T, T) weights with all mass on key targets[t] for query t."""
    return torch.nn.functional.one_hot(torch.tensor(targets), T).double().view(1, 1, T, T)


def causal_uniform(batch=1, heads=1):
    return torch.ones(T, T).tril().div(torch.arange(1, T + 1).unsqueeze(1)).expand(batch, heads, T, T).double()


PREVIOUS = one_hot_rows([0, 0, 1, 2, 3, 4, 5, 6])  # query t -> key t - 1
SELF = one_hot_rows(list(range(T)))
SINK = one_hot_rows([0] * T)
INDUCTION = one_hot_rows([0, 0, 0, 0, 1, 2, 3, 4])  # second block: the token after the first occurrence
PREVIOUS_AND_SELF = (PREVIOUS + SELF) / 2  # 50/50 (query 0 has only itself: 1)
PREVIOUS_AND_SELF[..., 0, 0] = 1.0


def score(metric_class, weights, ids, **kwargs):
    metric = metric_class(n_layer=1, n_head=weights.shape[1], **kwargs)
    metric.update([weights], ids)
    return metric.compute().item(), metric.queries().item()


def test_an_ideal_previous_token_head():
    assert score(PreviousTokenScore, PREVIOUS, DISTINCT) == (1.0, T - 1)
    assert score(InductionScore, PREVIOUS, REPEATED) == (0.0, 4)  # defined on the second block, and 0
    assert score(AttentionEntropy, PREVIOUS, DISTINCT)[0] == pytest.approx(0.0, abs=1e-9)
    assert tl.detect([PREVIOUS], DISTINCT, "previous_token").item() == pytest.approx((T - 1) / T)  # row 0 counts 0


def test_an_ideal_induction_head_on_a_repeated_block():
    assert score(InductionScore, INDUCTION, REPEATED) == (1.0, 4)  # the four queries of the second block
    assert score(PreviousTokenScore, INDUCTION, REPEATED)[0] == pytest.approx(1 / 7)  # only query 1 reads t - 1
    # TransformerLens averages over all 8 rows, the first block's four (no earlier occurrence) as 0
    assert tl.detect([INDUCTION], REPEATED, "induction").item() == pytest.approx(0.5)


def test_uniform_attention_scores_chance_and_entropy_one():
    uniform = causal_uniform()
    assert score(AttentionEntropy, uniform, DISTINCT) == (pytest.approx(1.0), T - 1)  # normalised by log(t + 1)
    chance = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    assert score(PreviousTokenScore, uniform, DISTINCT)[0] == pytest.approx(chance)
    assert score(FirstTokenScore, uniform, DISTINCT)[0] == pytest.approx(sum(1 / (t + 1) for t in range(2, T)) / 6)
    assert score(InductionScore, uniform, REPEATED)[0] == pytest.approx(sum(1 / (t + 1) for t in range(4, T)) / 4)


def test_a_sink_head():
    assert score(FirstTokenScore, SINK, DISTINCT) == (1.0, T - 2)  # t >= 2: at t = 1 key 0 is also the previous
    assert score(PreviousTokenScore, SINK, DISTINCT)[0] == pytest.approx(1 / 7)  # query 1 only
    assert score(InductionScore, SINK, REPEATED)[0] == 0.0  # key 0 follows no token


def test_half_previous_half_self_is_not_an_induction_head():
    assert score(PreviousTokenScore, PREVIOUS_AND_SELF, REPEATED)[0] == pytest.approx(0.5)
    assert score(InductionScore, PREVIOUS_AND_SELF, REPEATED)[0] == 0.0  # the query and t - 1 are not credited
    # TransformerLens credits the query's own key when a token repeats consecutively:
    assert tl.detect([PREVIOUS_AND_SELF], torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]]), "induction").item() > 0.4


def test_all_tokens_equal_leaves_previous_token_and_induction_not_applicable():
    for weights in (PREVIOUS, INDUCTION, SELF, causal_uniform()):
        for metric in (PreviousTokenScore, InductionScore):
            value, queries = score(metric, weights, EQUAL)
            assert math.isnan(value) and queries == 0, metric.__name__
    assert score(FirstTokenScore, SINK, EQUAL) == (1.0, T - 2)  # a position, whatever the tokens
    roles = summary(score_heads([PREVIOUS.float()], EQUAL))
    assert roles["induction"]["best"] is None and roles["previous_token"]["score"] is None


def test_lookback_k_and_per_head_shapes():
    back2 = one_hot_rows([0, 0, 0, 1, 2, 3, 4, 5])
    assert score(LookbackScore, back2, DISTINCT, k=2) == (1.0, T - 2)
    weights = torch.cat([causal_uniform(batch=2, heads=3), PREVIOUS.expand(2, 1, T, T)], dim=1)  # heads 0-2, 3
    metric = PreviousTokenScore(n_layer=2, n_head=4)
    metric.update([weights, weights.flip(1)], DISTINCT.expand(2, T))
    values = metric.compute()
    assert values.shape == (2, 4) and values[0, 3] == 1 and values[1, 0] == 1 and (values[0, :3] < 0.5).all()


def test_rejects_non_square_weights():
    with pytest.raises(ValueError, match="need square"):
        PreviousTokenScore(n_layer=1, n_head=1).update([torch.zeros(1, 1, 2, T)], DISTINCT)


def test_verdicts():
    scores = score_heads([SINK.float(), INDUCTION.float()], REPEATED)
    found = verdict(Pattern("an induction head in a layer >= 1", "induction", min_layer=1), scores)
    assert found["appeared"] is True and found["best"] == "L1H0"
    missing = verdict(Pattern("a head in layer 0", "induction"), score_heads([SINK.float()], REPEATED))
    assert missing["appeared"] is False and "NOT found" in missing["text"]
    unknown = verdict(Pattern("x", "induction"), score_heads([SINK.float()], EQUAL))
    assert unknown["appeared"] is None and "not applicable" in unknown["text"]
    assert "needs no attention" in verdict(Pattern("the current token predicts the next"), {})["text"]


def test_the_summary_and_the_verdict_name_the_same_head_for_the_task_s_role():
    # layer 0 scores higher as induction than layer 1, but the task needs the head in a layer >= 1
    weights = [INDUCTION.float(), (0.8 * INDUCTION + 0.2 * SELF).float()]
    pattern = Pattern("an induction head in a layer >= 1", "induction", min_layer=1)
    scores = score_heads(weights, REPEATED)
    assert summary(scores)["induction"]["best"] == "L0H0"  # without the task: the best over every layer
    roles = summary(scores, pattern)
    assert roles["induction"]["best"] == verdict(pattern, scores)["best"] == "L1H0"
    assert roles["previous_token"]["best"] is None or "min_layer" not in roles["previous_token"]  # other roles: all
    assert "induction L1H0 0.80" in describe(roles) and "(layers >= 1, as the task needs)" in describe(roles)


def test_backends_give_the_same_metrics():
    torch.manual_seed(0)
    attention = dict(n_head=4, n_kv_head=2, mask="causal")
    reference = ToyModel(64, 16, d_model=32, n_layer=2, attention={**attention, "backend": "naive"})
    ids = torch.randint(8, (3, 16))  # a small vocabulary: tokens repeat, induction is defined
    values = {}
    for backend in ("naive", "eager", "sdpa", "flex"):
        model = ToyModel(64, 16, d_model=32, n_layer=2, attention={**attention, "backend": backend})
        model.load_state_dict(reference.state_dict())
        with torch.no_grad():
            _, weights = model(ids, return_weights=True)
        values[backend] = [s.values for s in score_heads(weights, ids).values()]
        assert get_backend(backend).name == backend
    assert not any(v.isnan().any() for v in values["naive"])
    for backend, scores in values.items():
        for got, expected in zip(scores, values["naive"], strict=True):
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5, msg=backend)


def test_rows_that_do_not_sum_to_one_are_scored_as_shares_of_their_weight():
    """Sigmoid rows (each weight in [0, 1], rows summing to anything) and differential rows (signed) read
    as the share of the row's absolute weight: a head giving 0.9 to the previous token and 0.3 to itself
    is 75% a previous-token head, whichever sign the 0.3 has; softmax rows are read as they are."""
    for self_weight in (0.3, -0.3):
        rows = 0.9 * PREVIOUS + self_weight * SELF
        rows[..., 0, 0] = 1.0
        scores = score_heads([rows], DISTINCT, rows_sum_to_one=False)
        assert scores["previous_token"].values.item() == pytest.approx(0.75)
        assert scores["previous_token"].values.item() != pytest.approx(0.9)  # what the raw rows would say
    assert score_heads([PREVIOUS_AND_SELF], DISTINCT)["previous_token"].values.item() == pytest.approx(0.5)


def test_first_token_mass_reads_the_raw_weights():
    """The sink question: how much weight key 0 gets (queries t >= 2), per layer, rows as they are."""
    assert first_token_mass([SINK, 0.2 * SINK, -0.1 * SINK]) == pytest.approx([1.0, 0.2, -0.1])
    assert first_token_mass([PREVIOUS]) == [0.0]


def test_first_token_mass_reads_implied_weights_on_no_scale_as_shares():
    """A mixer's implied weights (retention's grow with the keys' norm) give a share of each row's absolute
    total: the same map at any scale gives the same mass, in [0, 1]; attention's layers stay raw."""
    rows = 7.0 * SINK - 3.0 * PREVIOUS  # all of key 0's weight and a signed previous token, on no scale
    raw, share = first_token_mass([rows, rows], as_shares=[False, True])
    assert raw == pytest.approx(7.0) and share == pytest.approx(0.7)
    assert first_token_mass([100 * rows], as_shares=[True]) == pytest.approx([0.7])
