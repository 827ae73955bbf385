"""Metrics of what heads do, as torchmetrics Metrics."""

from andrea.metrics.head_roles import (
    HEAD_ROLES,
    AttentionEntropy,
    FirstTokenScore,
    HeadScore,
    InductionScore,
    PreviousTokenScore,
)

__all__ = [
    "HEAD_ROLES",
    "AttentionEntropy",
    "FirstTokenScore",
    "HeadScore",
    "InductionScore",
    "PreviousTokenScore",
]
