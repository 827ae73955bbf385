"""Attention mechanisms: what a layer computes between its scores and its values, one file each
(andrea.attention.mechanisms.base has the contract); `mechanism=<name>` picks one."""

from andrea.attention.mechanisms.base import Mechanism, dense_scores
from andrea.attention.mechanisms.diff import Diff
from andrea.attention.mechanisms.fox import Fox
from andrea.attention.mechanisms.gated import Gated
from andrea.attention.mechanisms.qknorm import QKNorm
from andrea.attention.mechanisms.sigmoid import Sigmoid
from andrea.attention.mechanisms.sink import Sink
from andrea.attention.mechanisms.softcap import Softcap
from andrea.attention.mechanisms.softmax import Softmax
from andrea.attention.mechanisms.stickbreaking import StickBreaking

__all__ = [
    "Diff", "Fox", "Gated", "Mechanism", "QKNorm", "Sigmoid", "Sink", "Softcap", "Softmax", "StickBreaking",
    "dense_scores",
]  # fmt: skip
