"""Positions that live inside attention: RoPE rotates q and k, ALiBi biases the scores.

(Learned absolute positions are added to the token embeddings instead:
andrea.models.embedding.)
"""

from andrea.attention.positions.alibi import ALiBi, alibi_slopes
from andrea.attention.positions.rope import Rotary
from andrea.attention.positions.score_mod import ScoreMod

__all__ = ["ALiBi", "Rotary", "ScoreMod", "alibi_slopes"]
