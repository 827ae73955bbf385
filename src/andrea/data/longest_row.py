"""The longest row a data config makes: its seq_len, or a longer one its evaluation sets or training mixture name
(`data.eval_sets={len_4x: {seq_len: 256}}`). The model presets take it as their context,
`max_context: ${andrea.longest_row:${data}}`, so a task scored at 4x its training length runs as it is given
(learned positions past the training length stay untrained: a position-free mixer or RoPE is the length
question)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def longest_row(data: Mapping[str, Any]) -> Any:
    """data.seq_len, or the longest seq_len of its eval_sets and train_mix where one is longer."""
    lengths = [data["seq_len"]]
    for key in ("eval_sets", "train_mix"):
        for changes in (data.get(key) or {}).values():
            if isinstance(changes, Mapping) and isinstance(changes.get("seq_len"), int):
                lengths.append(changes["seq_len"])
    return max(lengths) if all(isinstance(n, int) for n in lengths) else data["seq_len"]
