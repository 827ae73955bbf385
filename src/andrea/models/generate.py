"""Autoregressive sampling, with or without a KV cache.

    stream(model, idx, n, ...)  yields (next token (B, 1), logits (B, V)) per step
    generate(model, idx, n, ...) -> idx (B, T + n)

With the cache, the prompt is projected once (prefill) and each later step
feeds one token. Without it, every step recomputes the whole context, the
reference the cache is tested against. Once the sequence outgrows the model's
max_context, both crop it to the last max_context tokens and recompute (the
positions restart at 0, as nanoGPT does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from andrea.mixers import MixerCache
from andrea.models.network import Network, attention_of, network
from andrea.models.streaming import streaming_cache


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """logits (B, V) -> token ids (B, 1). temperature 0 is greedy (argmax)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        before = sorted_logits.softmax(dim=-1).cumsum(dim=-1) - sorted_logits.softmax(dim=-1)
        drop = before >= top_p  # keep the smallest prefix whose mass reaches top_p (always the top token)
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def check_cacheable(model: nn.Module, prompt_len: int, total_len: int) -> None:
    """Refuse a cache that would give other tokens than recomputing: it holds a token's keys and
    values as first computed, so no earlier token may attend to one that comes after the prompt."""
    net = network(model)
    length = min(total_len, net.max_context)
    for attention in (layer for layer in attention_of(net) if layer is not None):
        allowed = attention.allowed(length).any(dim=0)  # (L, L) over heads, from the layer's own buffer
        later = torch.ones(length, length, dtype=torch.bool).triu(1)  # key after query
        later[:, :prompt_len] = False  # keys inside the prompt are all present at the prefill
        if bool((allowed & later).any()):
            raise ValueError(
                f"mask {attention.mask.name} lets earlier tokens see later ones, which a KV cache cannot "
                f"serve (prompt of {prompt_len} tokens); sample with cache=false"
            )


def stream(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    window: int | None = None,
    keep_first: int = 0,
) -> Iterator[tuple[Tensor, Tensor]]:
    """idx (B, T) prompt -> per step the sampled token (B, 1) and the logits it came from (B, V).

    `window` streams (andrea.models.streaming): each attention layer keeps the first `keep_first` tokens and the
    last `window`, past the model's context. A cache the model cannot serve is refused here, when called, not at
    the first step."""
    net, sampling = network(model), (temperature, top_k, top_p, generator)
    if getattr(net, "readout", None) is not None:  # andrea.models.pooled_readout
        raise ValueError(
            "model.net.readout=pooled_last decodes every position from the last one: it has no next token to "
            "sample; sample a model trained with model.net.readout=next_token"
        )
    if window is not None:
        if idx.shape[1] > window + keep_first:
            raise ValueError(
                f"a prompt of {idx.shape[1]} tokens is longer than the streaming cache (stream.window={window} + "
                f"stream.keep_first={keep_first}); shorten the prompt"
            )
        return _steps(net, idx, max_new_tokens, streaming_cache(net, window, keep_first), sampling, streaming=True)
    cache = net.new_cache() if use_cache and len(net.mixers) > 0 else None
    if cache is not None:
        check_cacheable(model, idx.shape[1], idx.shape[1] + max_new_tokens)
    return _steps(net, idx, max_new_tokens, cache, sampling)


def _steps(
    model: Network,
    idx: Tensor,
    max_new_tokens: int,
    cache: list[MixerCache] | None,
    sampling: tuple[float, int | None, float | None, torch.Generator | None],
    streaming: bool = False,
) -> Iterator[tuple[Tensor, Tensor]]:
    context = model.max_context
    fed = 0  # tokens of idx already in the cache
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if cache is not None and (streaming or idx.shape[1] <= context):
                logits = model(idx[:, fed:], cache=cache)[0][:, -1]  # (B, V): the new tokens only
                fed = idx.shape[1]
            else:
                logits = model(idx[:, -context:])[0][:, -1]  # (B, V): the whole (cropped) context again
            token = sample_next(logits, *sampling)  # (B, 1)
            idx = torch.cat((idx, token), dim=1)
            yield token, logits


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, **options: Any) -> Tensor:
    """idx (B, T) -> (B, T + max_new_tokens); options as for `stream`."""
    tokens = [token for token, _ in stream(model, idx, max_new_tokens, **options)]
    return torch.cat([idx, *tokens], dim=1)
