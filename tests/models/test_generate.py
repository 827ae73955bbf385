"""KV-cache generation: the same tokens and logits as recomputing the context, for every
backend x mask x head config x position scheme that runs on CPU; bounded caches; sampling."""

import pytest
import torch

from andrea.attention import Causal
from andrea.models.generate import check_cacheable, generate, sample_next, stream
from andrea.models.gpt import GPT
from andrea.models.toy import ToyModel

BACKENDS = ["naive", "eager", "sdpa", "flex"]
HEADS = {"mha": 4, "gqa": 2, "mqa": 1}  # n_kv_head of 4 query heads
MASKS = {  # name -> (mask expression, prompt length)
    "causal": ("causal", 5),
    "sliding_window": ("sliding_window(window=4)", 5),
    "prefix_lm": ("prefix_lm(prefix_len=4)", 5),  # cacheable once the prompt covers the prefix
    "prefix_lm&window": ("prefix_lm(prefix_len=3) & sliding_window(window=5)", 5),
}
POSITIONS = ["learned", "rope", "alibi", "none"]
CONTEXT, NEW = 24, 12
NEW_FLEX = 4  # eager Flex on CPU traces every new (T, S) shape anew (~0.2 s): prefill + 3 decode steps


def tiny_gpt(backend="sdpa", mask="causal", n_kv_head=4, position="learned", max_context=CONTEXT, seed=0):
    torch.manual_seed(seed)
    attention = dict(n_head=4, n_kv_head=n_kv_head, backend=backend, mask=mask)
    return GPT(
        vocab_size=61, max_context=max_context, n_layer=2, d_model=32, attention=attention, position=position
    ).eval()


def cached_and_recomputed(model, prompt, new=NEW):
    steps = {use: list(stream(model, prompt, new, temperature=0, use_cache=use)) for use in (True, False)}
    tokens = {use: torch.cat([t for t, _ in s], dim=1) for use, s in steps.items()}
    logits = {use: torch.stack([lg for _, lg in s]) for use, s in steps.items()}
    return tokens, logits


def _cells():
    """Every backend x mask x heads x position; MQA (GQA's extreme) and position-free cells under -m slow, and
    Flex's but one (GQA, a window, RoPE: eager Flex on CPU traces each new shape, ~1.4 s a cell)."""
    for backend in BACKENDS:
        for mask in MASKS:
            for heads in HEADS:
                for position in POSITIONS:
                    slow = heads == "mqa" or position == "none"
                    slow |= backend == "flex" and (heads, mask, position) != ("gqa", "sliding_window", "rope")
                    marks = [pytest.mark.slow] if slow else []
                    yield pytest.param(
                        backend, mask, heads, position, marks=marks, id=f"{backend}-{mask}-{heads}-{position}"
                    )


@pytest.mark.parametrize(("backend", "mask", "heads", "position"), list(_cells()))
def test_cached_generation_matches_recomputing(backend, mask, heads, position):
    expression, prompt_len = MASKS[mask]
    model = tiny_gpt(backend, expression, HEADS[heads], position)
    prompt = torch.randint(61, (2, prompt_len), generator=torch.Generator().manual_seed(1))
    tokens, logits = cached_and_recomputed(model, prompt, NEW_FLEX if backend == "flex" else NEW)
    assert torch.equal(tokens[True], tokens[False])
    torch.testing.assert_close(logits[True], logits[False], atol=1e-5, rtol=1e-5)


def test_the_cache_holds_only_the_kv_heads():
    model = tiny_gpt(n_kv_head=1)
    cache = model.new_cache()
    model(torch.randint(61, (3, 7)), cache=cache)
    assert [tuple(c.k.shape) for c in cache] == [(3, 1, 7, 8)] * 2  # (B, n_kv_head, S, head_dim)


def test_a_sliding_window_keeps_a_bounded_cache():
    model = tiny_gpt(mask="sliding_window(window=4)", position="rope")
    cache = model.new_cache()
    model(torch.randint(61, (1, 9)), cache=cache)
    for _ in range(10):
        model(torch.randint(61, (1, 1)), cache=cache)
    assert [len(c) for c in cache] == [4, 4] and cache[0].next_position == 19
    full = tiny_gpt(position="rope").new_cache()
    tiny_gpt(position="rope")(torch.randint(61, (1, 9)), cache=full)
    assert len(full[0]) == 9  # causal: everything stays


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_past_max_context_both_paths_slide_the_window(position):
    model = tiny_gpt(max_context=10, position=position)
    tokens, logits = cached_and_recomputed(model, torch.randint(61, (1, 4)), new=15)
    assert torch.equal(tokens[True], tokens[False])
    torch.testing.assert_close(logits[True], logits[False], atol=1e-5, rtol=1e-5)


def test_masks_a_cache_cannot_serve_are_refused():
    with pytest.raises(ValueError, match="mask none lets earlier tokens see later ones.*cache=false"):
        list(stream(tiny_gpt(mask=None), torch.zeros(1, 3, dtype=torch.long), 2))
    with pytest.raises(ValueError, match="prefix_lm_4 .*prompt of 2 tokens"):
        list(stream(tiny_gpt(mask="prefix_lm(prefix_len=4)"), torch.zeros(1, 2, dtype=torch.long), 2))
    out = generate(tiny_gpt(mask=None), torch.zeros(1, 3, dtype=torch.long), 2, use_cache=False)
    assert out.shape == (1, 5)  # recomputing serves any mask
    check_cacheable(tiny_gpt(mask=Causal()), 1, 30)  # causal is always fine, even past max_context


def test_toy_model_generates_with_a_cache_and_without_attention():
    torch.manual_seed(0)
    toy = ToyModel(vocab_size=16, max_context=12, d_model=16, n_layer=2, attention=dict(n_head=2)).eval()
    prompt = torch.randint(16, (1, 3))
    assert torch.equal(
        generate(toy, prompt, 8, temperature=0), generate(toy, prompt, 8, temperature=0, use_cache=False)
    )
    ablation = ToyModel(vocab_size=16, max_context=12, attention=None).eval()
    assert generate(ablation, prompt, 4, temperature=0).shape == (1, 7)


def test_sampling_rules():
    logits = torch.tensor([[0.0, 3.0, 2.0, 1.0, -1.0]])
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    assert sample_next(logits, temperature=0).item() == 1
    assert sample_next(logits, top_k=1, generator=g()).item() == 1
    assert sample_next(logits, top_p=1e-3, generator=g()).item() == 1  # the top token always survives
    draws = torch.cat([sample_next(logits.expand(4000, 5), top_k=2, generator=g())]).flatten()
    assert set(draws.tolist()) == {1, 2}  # only the two largest logits
    p = torch.softmax(logits, -1)[0]  # 0.03 0.64 0.23 0.09 0.01: top_p=0.8 keeps tokens 1 and 2
    draws = sample_next(logits.expand(4000, 5), top_p=0.8, generator=g()).flatten()
    assert set(draws.tolist()) == {1, 2}
    share = (draws == 1).float().mean().item()
    assert abs(share - p[1] / (p[1] + p[2])) < 0.03  # renormalised over what is kept
    hot = sample_next(logits.expand(4000, 5), temperature=100.0, generator=g()).flatten()
    assert len(set(hot.tolist())) == 5  # a high temperature flattens the distribution


def test_the_same_seed_gives_the_same_sample():
    model, prompt = tiny_gpt(), torch.zeros(1, 2, dtype=torch.long)
    a = generate(model, prompt, 10, top_k=20, generator=torch.Generator().manual_seed(3))
    b = generate(model, prompt, 10, top_k=20, generator=torch.Generator().manual_seed(3))
    c = generate(model, prompt, 10, top_k=20, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
