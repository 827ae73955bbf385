"""Metrics of what heads do, as torchmetrics Metrics, and the verdicts drawn from them."""

from andrea.metrics.head_roles import (
    HEAD_ROLES,
    AttentionEntropy,
    FirstTokenScore,
    HeadScore,
    InductionScore,
    LookbackScore,
    PreviousTokenScore,
    role_metric,
)

__all__ = [
    "HEAD_ROLES",
    "AttentionEntropy",
    "FirstTokenScore",
    "HeadScore",
    "InductionScore",
    "LookbackScore",
    "PreviousTokenScore",
    "role_metric",
]
