"""StudyProbe: the Lightning callback that records a study's numbers while its run trains (at step 0, every
`study.every_n_steps`, and at the end) and its final ones once the run ends; a resumed run keeps the records
made before its checkpoint (they are in it)."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from andrea.train.studies.base import Study


class StudyProbe(Callback):
    def __init__(self, study: Study) -> None:
        self.study = study
        self.series: list[dict[str, float]] = []

    def state_dict(self) -> dict[str, Any]:
        return {"series": self.series}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.series = list(state_dict.get("series", []))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.study.every_n_steps and not self.series:
            self._record(trainer, pl_module)  # the model as initialised

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        every = self.study.every_n_steps
        if every and trainer.global_step % every == 0:
            self._record(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.study.every_n_steps:
            self._record(trainer, pl_module)

    def _record(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        step = trainer.global_step
        if self.series and self.series[-1]["step"] == step:
            return
        data = trainer.datamodule  # type: ignore[attr-defined]  # Lightning sets it
        self.series.append({"step": step, **_measured(self.study.probe, pl_module, data)})

    def results(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        """What result.json keeps under `study`: the records and the trained model's final numbers."""
        return {
            "name": self.study.name,
            "series": self.series,
            "final": _measured(self.study.final, pl_module, trainer.datamodule),  # type: ignore[attr-defined]
        }


def _measured(measure: Any, module: L.LightningModule, data: Any) -> dict[str, Any]:
    """`measure(module, data)` in eval mode under no_grad, the module's mode restored after."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            return dict(measure(module, data))
    finally:
        module.train(was_training)
