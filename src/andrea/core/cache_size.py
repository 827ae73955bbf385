"""What a layer's cache for generation keeps, counted the same way for every mixer: a KV cache's keys and values
per token (at most a bounded look-back's), a recurrent mixer's fixed-size state per sequence. The memory
estimate (andrea.models.memory) and the cache check read it from each layer's `cache_size()`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheSize:
    """The numbers a layer's cache keeps for one sequence of T tokens: `per_token` for each token it keeps
    (a KV cache: 2·H_kv·d), at most `max_tokens` of them (a bounded look-back; None: every token), and
    `per_sequence` whatever T is (a recurrent mixer's state); `conv` of those, what its short convolutions keep
    (their last kernel - 1 inputs), which Zoology's count of a state leaves out."""

    per_token: int
    per_sequence: int = 0
    max_tokens: int | None = None
    conv: int = 0

    def at(self, T: int) -> int:
        """The numbers kept after T tokens."""
        kept = T if self.max_tokens is None else min(T, self.max_tokens)
        return self.per_sequence + self.per_token * kept
