"""MacroAccuracy: the accuracy of each class averaged over the classes, counted in O(V) memory.

torchmetrics' MulticlassAccuracy(average="macro") derives its counts from a (V, V) confusion matrix, one bincount
of V**2 entries per update: 2.5e9 integers (20 GB) at GPT-2's 50,257 tokens. Macro accuracy needs three counts
per class only, each a bincount of V entries:

    hits[c]      = positions whose label is c and whose prediction is c       (true positives)
    labelled[c]  = positions whose label is c                                 (true positives + false negatives)
    predicted[c] = positions predicted as c                                   (true positives + false positives)

The score is the mean over the classes that are labelled or predicted of hits / labelled (0 for a class predicted
but never labelled), which is torchmetrics' own definition: equal to it at every vocabulary a confusion matrix fits
(tests/train/test_macro_accuracy.py).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric


class MacroAccuracy(Metric):
    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    hits: Tensor  # (V,) each: the states add_state registers
    labelled: Tensor
    predicted: Tensor

    def __init__(self, num_classes: int, ignore_index: int | None = None) -> None:
        super().__init__()
        self.num_classes, self.ignore_index = num_classes, ignore_index
        for name in ("hits", "labelled", "predicted"):
            self.add_state(name, default=torch.zeros(num_classes, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, logits: Tensor, labels: Tensor) -> None:
        """logits (N, V) or predictions (N,); labels (N,), ignore_index positions left out."""
        predictions = logits.argmax(dim=-1) if logits.is_floating_point() else logits
        if self.ignore_index is not None:
            kept = labels != self.ignore_index
            predictions, labels = predictions[kept], labels[kept]
        counts = self._count  # each (V,)
        self.hits += counts(labels[predictions == labels])
        self.labelled += counts(labels)
        self.predicted += counts(predictions)

    def _count(self, classes: Tensor) -> Tensor:
        return torch.bincount(classes.long(), minlength=self.num_classes)

    def compute(self) -> Tensor:
        present = (self.labelled + self.predicted) > 0
        recall = self.hits.double() / self.labelled.clamp(min=1)  # 0 where a class is predicted, never labelled
        return (recall[present].sum() / present.sum().clamp(min=1)).float()
