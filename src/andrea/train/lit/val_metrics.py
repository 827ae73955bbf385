"""What a validation set is scored by, per set: the loss, the token accuracy on scored positions (micro), the
accuracy per class averaged over the classes (macro, the figure MAD reports: MacroAccuracy, torchmetrics'
definition counted in O(V); a class neither in the labels nor predicted is left out) and the perplexity. The
task's own validation set logs under `val/`, each evaluation set the data module names under `val_<name>/`."""

from __future__ import annotations

import lightning as L
from torch import Tensor, nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy
from torchmetrics.text import Perplexity

from andrea.data.tasks import IGNORE_INDEX
from andrea.train.lit.macro_accuracy import MacroAccuracy

MAIN = "val"
SCORES = ("loss", "acc", "acc_macro", "perplexity")


class SetMetrics(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.loss = MeanMetric()
        self.acc = MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE_INDEX)
        self.acc_macro = MacroAccuracy(vocab_size, ignore_index=IGNORE_INDEX)
        self.perplexity = Perplexity(ignore_index=IGNORE_INDEX)

    def update(self, loss: Tensor, logits: Tensor, labels: Tensor) -> None:
        self.loss(loss, weight=(labels != IGNORE_INDEX).sum())
        flat_logits, flat_labels = logits.flatten(0, 1), labels.flatten()
        self.acc(flat_logits, flat_labels)
        self.acc_macro(flat_logits, flat_labels)
        self.perplexity(logits.float(), labels)

    def log_to(self, module: L.LightningModule, name: str) -> None:
        """Logged as epoch means under `<prefix>/loss`, `/acc`, `/acc_macro` and `/perplexity`."""
        prefix, main = (MAIN, True) if name == MAIN else (f"{MAIN}_{name}", False)
        for metric in SCORES:
            module.log(
                f"{prefix}/{metric}", getattr(self, metric), on_epoch=True, add_dataloader_idx=False,
                prog_bar=main and metric in ("loss", "acc"),
            )  # fmt: skip


def set_names(datamodule: object) -> list[str]:
    """The validation sets, in the order the data module's val_dataloader returns them."""
    return list(getattr(datamodule, "val_set_names", [MAIN]))
