"""KV cache: the keys and values of the tokens already seen, kept per attention layer.

A decode step projects only the new tokens; their queries attend to the cached
keys plus their own. Grouped heads cache only the n_kv_head key/value heads. A
mask with a bounded look-back (a causal sliding window) keeps a bounded cache:
after each step only the last `max_lookback` keys stay, the rest can never be
seen again.
"""

from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    rotate_cached = False  # True: keys are cached before RoPE and rotated at their place in the cache each step

    def __init__(self, max_lookback: int | None = None) -> None:
        self.max_lookback = max_lookback
        self.k: Tensor | None = None  # (B, H_kv, S, d)
        self.v: Tensor | None = None  # (B, H_kv, S, d)
        self.side: dict[str, Tensor] = {}  # what a layer's other parts keep of each token (DSA's index keys)
        self.start = 0  # absolute position of the first cached key

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    @property
    def next_position(self) -> int:
        """The absolute position of the next token to come."""
        return self.start + len(self)

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new tokens' k, v (B, H_kv, T, d); returns every key and value to attend to."""
        if self.k is not None and self.v is not None:  # set together
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)  # (B, H_kv, S + T, d)
        self.k, self.v = k, v
        return k, v

    def extend_side(self, name: str, new: Tensor) -> Tensor:
        """Append the new tokens' `name` (B, 1, T, ...) beside their keys; returns every token's, cached and new
        (B, 1, S, ...). Called after `extend`, once a step."""
        if name in self.side:
            new = torch.cat((self.side[name], new), dim=2)
        if new.shape[2] != len(self):
            raise ValueError(f"KV cache: {name} for {new.shape[2]} tokens beside {len(self)} keys")
        self.side[name] = new
        return new

    def trim(self) -> None:
        """Drop the keys no future query can see (after the step's attention), and what is kept beside them."""
        drop = len(self) - (self.max_lookback or len(self))
        if drop > 0:
            assert self.k is not None and self.v is not None  # drop > 0: keys are cached
            self.k, self.v = self.k[:, :, drop:], self.v[:, :, drop:]
            self.side = {name: kept[:, :, drop:] for name, kept in self.side.items()}
            self.start += drop

    def __repr__(self) -> str:
        return f"KVCache(start={self.start}, length={len(self)}, max_lookback={self.max_lookback})"


class StreamingCache(KVCache):
    """StreamingLLM's cache (Xiao et al. 2023): the first `keep_first` tokens (the attention sinks) and the last
    `window`, the new token among them, whatever the length. Positions are numbered within the cache, not in the
    text: keys are kept before RoPE and rotated at their place in the cache every step (FusedQKV.project), so a
    query always sees its keys at positions the model trained on, with the evicted middle closed up."""

    rotate_cached = True

    def __init__(self, window: int, keep_first: int = 0) -> None:
        super().__init__()
        self.window, self.keep_first = window, keep_first

    @property
    def next_position(self) -> int:
        """The next token's position within the cache (the last place, once the cache is full)."""
        return min(len(self), self.keep_first + self.window - 1)

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new tokens, then evict the oldest past the first `keep_first`: the new tokens attend to
        exactly what the cache keeps."""
        k, v = super().extend(k, v)
        drop = len(self) - self.keep_first - self.window
        if drop > 0:
            first, last = slice(0, self.keep_first), slice(self.keep_first + drop, None)
            self.k = k = torch.cat((k[:, :, first], k[:, :, last]), dim=2)
            self.v = v = torch.cat((v[:, :, first], v[:, :, last]), dim=2)
            self.start += drop  # tokens evicted so far
        return k, v

    def __repr__(self) -> str:
        return f"StreamingCache(keep_first={self.keep_first}, window={self.window}, length={len(self)})"


class LatentCache(KVCache):
    """Latent attention's cache (andrea.attention.latent): one [c_KV ; k_R] (B, 1, S, r + d_R) per token, the
    shared key of the absorbed form; its values are the first r numbers of the same tensor, kept as a view."""

    def __init__(self, kv_rank: int, max_lookback: int | None = None) -> None:
        super().__init__(max_lookback)
        self.kv_rank = kv_rank

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new tokens' latents k (B, 1, T, r + d_R) (v, a view of them, is not stored twice)."""
        if self.k is not None:
            k = torch.cat((self.k, k), dim=2)  # (B, 1, S + T, r + d_R)
        self.k, self.v = k, k[..., : self.kv_rank]
        return self.k, self.v
