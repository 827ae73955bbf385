"""StreamingLLM's cache policy: the first `keep_first` tokens and the last `window`, positions numbered within
the cache. Each streamed step of one layer is checked against its definition: a plain forward over exactly the
tokens the cache keeps, numbered 0.. from the first kept one. (Past one layer a cached key also carries what its
token saw when it came, evicted tokens included, as StreamingLLM's cache does: no plain forward gives that.)"""

import pytest
import torch

from andrea.attention.kv_cache import StreamingCache
from andrea.models.generate import stream
from andrea.models.gpt import GPT
from andrea.models.network import network
from andrea.models.streaming import streaming_cache, streaming_losses

CONTEXT = 16


def rope_gpt(seed=0, n_layer=2, **attention):
    torch.manual_seed(seed)
    spec = dict(n_head=4, backend="eager") | attention
    return GPT(vocab_size=53, max_context=CONTEXT, n_layer=n_layer, d_model=32, attention=spec, position="rope").eval()


@pytest.mark.parametrize(("window", "keep_first"), [(10, 4), (12, 0), (6, 1)])
def test_each_streamed_token_sees_the_kept_tokens_renumbered_from_zero(window, keep_first):
    model, ids = rope_gpt(n_layer=1), torch.randint(0, 53, (2, 40), generator=torch.Generator().manual_seed(1))
    losses = streaming_losses(network(model), ids, window, keep_first)  # (2, 39)
    for t in range(window + keep_first, 39):  # every token after the cache first fills
        kept = torch.cat((ids[:, :keep_first], ids[:, t - window + 1 : t + 1]), dim=1)  # what the cache holds
        logits = model(kept)[0][:, -1]  # a plain forward: positions 0.. over the kept tokens
        expected = torch.nn.functional.cross_entropy(logits, ids[:, t + 1], reduction="none")
        torch.testing.assert_close(losses[:, t], expected, rtol=1e-4, atol=1e-5)


def test_before_the_cache_fills_streaming_is_the_plain_forward():
    model, ids = rope_gpt(), torch.randint(0, 53, (1, 14))
    losses = streaming_losses(network(model), ids, 12, 4)
    logits = model(ids)[0][:, :-1]
    torch.testing.assert_close(
        losses, torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    )


def test_the_recomputed_reference_reads_each_tokens_last_context():
    model, ids = rope_gpt(), torch.randint(0, 53, (1, 30))
    losses = streaming_losses(network(model), ids, None)
    logits = model(ids[:, 30 - 1 - CONTEXT : 29])[0][:, -1]  # the last token's own window
    torch.testing.assert_close(losses[:, -1], torch.nn.functional.cross_entropy(logits, ids[:, -1], reduction="none"))
    short = streaming_losses(network(model), ids[:, :10], None)  # shorter than the context: one plain forward
    expected = torch.nn.functional.cross_entropy(
        model(ids[:, :10])[0][:, :-1].transpose(1, 2), ids[:, 1:10], reduction="none"
    )
    torch.testing.assert_close(short, expected)


@pytest.mark.parametrize("keep_first", [1, 4])
def test_the_recomputed_reference_can_keep_the_first_tokens_and_then_is_one_layer_s_stream(keep_first):
    """Recomputing each token from the first keep_first and its last CONTEXT - keep_first: for one layer, what the
    streaming cache of as many gives (the reference of a model trained with a BOS first)."""
    model, ids = rope_gpt(n_layer=1), torch.randint(0, 53, (2, 40), generator=torch.Generator().manual_seed(2))
    recomputed = streaming_losses(network(model), ids, None, keep_first)
    torch.testing.assert_close(recomputed, streaming_losses(network(model), ids, CONTEXT - keep_first, keep_first))
    t = 30  # one token past the context, by its definition
    kept = torch.cat((ids[:, :keep_first], ids[:, t - CONTEXT + keep_first + 1 : t + 1]), dim=1)
    expected = torch.nn.functional.cross_entropy(model(kept)[0][:, -1], ids[:, t + 1], reduction="none")
    torch.testing.assert_close(recomputed[:, t], expected)


def test_the_cache_keeps_the_first_and_the_last_tokens():
    cache = StreamingCache(window=3, keep_first=2)
    for t in range(8):
        k, _ = cache.extend(torch.full((1, 1, 1, 1), float(t)), torch.full((1, 1, 1, 1), float(t)))
    assert k.flatten().tolist() == [0.0, 1.0, 5.0, 6.0, 7.0]  # what the newest token attends to
    assert (cache.next_position, cache.start) == (4, 3)  # the last place within the cache; 3 tokens evicted


def test_sampling_streams_past_the_context_at_a_constant_cache():
    model = rope_gpt()
    steps = list(stream(model, torch.tensor([[1, 2, 3]]), 3 * CONTEXT, temperature=0, window=8, keep_first=4))
    assert len(steps) == 3 * CONTEXT and all(torch.isfinite(logits).all() for _, logits in steps)


@pytest.mark.parametrize(
    ("build", "refusal"),
    [
        (
            lambda: GPT(vocab_size=53, max_context=CONTEXT, n_layer=1, d_model=32, attention=dict(n_head=4)),
            "position=learned",
        ),
        (lambda: rope_gpt(mask="prefix_lm(prefix_len=3)"), "layer 0 has mask prefix_lm_3; streaming needs a causal"),
        (lambda: rope_gpt(mechanism="fox"), "mechanism fox"),
        (
            lambda: GPT(
                vocab_size=53, max_context=CONTEXT, n_layer=1, d_model=32, attention=dict(n_head=4), position="alibi"
            ),  # fmt: skip
            "layer 0 has position=alibi",
        ),
        (lambda: rope_gpt(selection={"name": "dsa", "topk": 4}), "layer 0 has selection=dsa, which chooses keys at"),
    ],
    ids=["learned-positions", "prefix-mask", "fox", "alibi", "selection"],
)
def test_what_cannot_number_positions_in_the_cache_is_refused_in_one_line(build, refusal):
    with pytest.raises(ValueError, match=refusal) as refused:
        streaming_cache(network(build()), 8, 4)
    assert "\n" not in str(refused.value) and "stream.window" in str(refused.value)


def test_a_cache_longer_than_the_context_or_a_prompt_longer_than_the_cache_is_refused():
    with pytest.raises(ValueError, match="exceeds the model's max_context=16"):
        streaming_cache(network(rope_gpt()), CONTEXT, 4)
    with pytest.raises(ValueError, match="longer than the streaming cache"):
        stream(rope_gpt(), torch.zeros(1, 10, dtype=torch.long), 4, window=4, keep_first=2)


def test_a_window_a_nope_layer_and_a_recurrent_one_stream_past_the_context():
    """Each layer as its kind is: a causal sliding window on RoPE, a layer without positions and a linear layer
    (its own state, of a constant size) stream three contexts' worth of tokens, the attention caches bounded."""
    torch.manual_seed(0)
    kinds = {
        "local": {"mixer": "attention", "mask": {"name": "sliding_window", "window": 4}},
        "nope": {"mixer": "attention", "position": {"kind": "none"}},
        "linear": {"mixer": "linear", "n_head": 4},
    }
    model = GPT(vocab_size=53, max_context=CONTEXT, n_layer=3, d_model=32, attention=dict(n_head=4, backend="eager"),
                position="rope", kinds=kinds, layout=["local", "nope", "linear"]).eval()  # fmt: skip
    cache = streaming_cache(network(model), 8, 4)
    assert [type(layer).__name__ for layer in cache] == ["StreamingCache", "StreamingCache", "StateCache"]
    steps = list(stream(model, torch.tensor([[1, 2, 3]]), 3 * CONTEXT, temperature=0, window=8, keep_first=4))
    assert len(steps) == 3 * CONTEXT and all(torch.isfinite(logits).all() for _, logits in steps)
