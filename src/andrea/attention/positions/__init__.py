"""Positions that live inside attention: RoPE rotates q and k, ALiBi biases the scores.

(Learned absolute positions are added to the token embeddings instead:
andrea.models.embedding.)
"""

from andrea.attention.positions.alibi import ALiBi, alibi_slopes
from andrea.attention.positions.rope import Rotary
from andrea.attention.positions.score_mod import ScoreMod

# Every position scheme (position.kind), for every model and block: one list, checked where it is read.
POSITIONS = {
    "learned": "learned absolute positions added to the token embeddings (GPT-2)",
    "rope": "rotary positions applied to queries and keys inside attention",
    "alibi": "a per-head linear distance penalty on the attention scores",
    "none": "no position information (a causal mask alone can still count)",
}

__all__ = ["ALiBi", "POSITIONS", "Rotary", "ScoreMod", "alibi_slopes"]
