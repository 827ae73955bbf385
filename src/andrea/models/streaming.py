"""StreamingLLM's cache policy (Xiao et al. 2023) for a network: every attention layer keeps its first
`keep_first` tokens and its last `window`, and numbers positions within the cache (andrea.attention.kv_cache.
StreamingCache), so generation goes on past the context the model trained on at a constant cost. A recurrent
layer keeps its own state, which is of a constant size already.

Positions within the cache need RoPE with keys cached before rotation, or no positions in the layer (NoPE); a
layer's mask must be causal and depend on distances only (causal, a causal sliding window). Anything else is
refused in one line: learned positions in the embedding, ALiBi, latent heads, a selection of keys (dsa, moba, nsa), a
mask that depends on absolute places, a mechanism that appends channels to the keys (forgetting attention), or a
cache longer than the context.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from andrea.attention.block import MultiHeadSelfAttention
from andrea.attention.kv_cache import StreamingCache
from andrea.attention.masks import Mask
from andrea.mixers import MixerCache
from andrea.mixers.base import mixer_parts
from andrea.mixers.parallel import ParallelCache
from andrea.models.network import Network


def streaming_cache(net: Network, window: int, keep_first: int = 0) -> list[MixerCache]:
    """A StreamingCache per layer; ValueError in one line naming the setting and the fix."""
    if not isinstance(window, int) or window < 1 or not isinstance(keep_first, int) or keep_first < 0:
        raise ValueError(
            f"stream.window={window}, stream.keep_first={keep_first}: give a window >= 1 and keep_first >= 0"
        )
    if window + keep_first > net.max_context:
        raise ValueError(
            f"stream.window={window} + stream.keep_first={keep_first} exceeds the model's max_context="
            f"{net.max_context}: positions past it were never trained; lower stream.window"
        )
    problem = unstreamable(net)
    if problem:
        raise ValueError(f"stream.window: {problem}; sample without stream.window")
    return [_streaming(mixer, window, keep_first) for mixer in net.mixers]


def _streaming(mixer: Any, window: int, keep_first: int) -> Any:
    """One layer's cache: a StreamingCache for attention, a parallel layer's parts each theirs, a state as it is."""
    if isinstance(mixer, MultiHeadSelfAttention):
        return StreamingCache(window, keep_first)
    parts = mixer_parts(mixer)
    if parts:
        return ParallelCache({name: _streaming(part, window, keep_first) for name, part in parts.items()})
    return mixer.new_cache()


def unstreamable(net: Network) -> str | None:
    """Why `net` cannot stream ("layer 0 has position=alibi: ..."), or None: what the streaming cache and a
    study that streams its runs (experiment=sinks) both ask, before either does any work."""
    if getattr(getattr(net, "embed", None), "position", None) is not None:
        return "embedding has position=learned: positions within the cache need position=rope or none"
    for layer, mixer in enumerate(net.mixers):
        for part in mixer_parts(mixer).values() or [mixer]:
            attention = part if isinstance(part, MultiHeadSelfAttention) else None
            problem = None if attention is None else _unstreamable(attention)  # a recurrent state streams as it is
            if problem:
                return f"layer {layer} {problem}"
    return None


def _unstreamable(mixer: MultiHeadSelfAttention) -> str | None:
    """Why an attention layer cannot number positions within a streaming cache, or None."""
    if mixer.position not in ("rope", "none", "learned"):
        return (
            f"has position={mixer.position}: positions within the cache need position=rope (keys cached before "
            "rotation) or none"
        )
    if mixer.head_kind == "mla":
        return "has latent heads (heads=mla), whose cache holds keys already rotated"
    if mixer.selection is not None:
        return (
            f"has selection={mixer.selection.name}, which chooses keys at their places in the text (DSA's index keys "
            "cached rotated, MoBA's blocks by position)"
        )
    if not (mixer.mask.translation_invariant and mixer.mask.attends_self and _causal(mixer.mask)):
        return f"has mask {mixer.mask.name}; streaming needs a causal mask of distances (causal, sliding_window)"
    if mixer.mechanism.extra_channels:
        return f"has mechanism {mixer.mechanism.name}, whose extra key channels carry positions of their own"
    return None


def _causal(mask: Mask) -> bool:
    """No query sees a later key."""
    return not bool(torch.triu(mask.dense(8, 8)[0, 0], diagonal=1).any())


def streaming_losses(net: Network, ids: Tensor, window: int | None, keep_first: int = 0) -> Tensor:
    """ids (B, L) -> (B, L - 1) the loss of each next token, read as a stream: the first window + keep_first tokens
    at once, then one a step through the streaming cache. window None: each token from the first keep_first tokens
    and the last max_context - keep_first recomputed (the sliding window with re-computation: exact, and
    O(context) a token)."""
    L = ids.shape[1]
    if window is None:
        return token_losses(_recomputed_logits(net, ids, keep_first), ids[:, 1:])
    cache, first = streaming_cache(net, window, keep_first), min(L - 1, window + keep_first)
    logits = [net(ids[:, :first], cache=cache)[0]]
    logits += [net(ids[:, t : t + 1], cache=cache)[0] for t in range(first, L - 1)]
    return token_losses(torch.cat(logits, dim=1), ids[:, 1:])


def _recomputed_logits(net: Network, ids: Tensor, keep_first: int = 0, rows: int = 256) -> Tensor:
    """(B, L - 1, V): each token's prediction from the first keep_first tokens and its last max_context -
    keep_first, `rows` windows a forward."""
    C, L, k = net.max_context, ids.shape[1], keep_first
    head = net(ids[:, : min(C, L - 1)])[0]  # the first tokens see everything before them
    if L - 1 <= C:
        return head
    recent = ids.unfold(1, C - k, 1)[:, k + 1 : L - C + k]  # (B, n, C - k): those ending at C .. L - 2
    windows = torch.cat([ids[:, None, :k].expand(-1, recent.shape[1], -1), recent], dim=-1)  # (B, n, C)
    tails = [net(chunk.flatten(0, 1))[0][:, -1].unflatten(0, chunk.shape[:2]) for chunk in windows.split(rows, dim=1)]
    return torch.cat([head, *tails], dim=1)


def token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    """logits (B, T, V), targets (B, T) -> (B, T): the cross-entropy of each position's prediction."""
    return F.cross_entropy(logits.transpose(1, 2).float(), targets, reduction="none")
