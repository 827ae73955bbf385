"""The wandb logger andrea's logger=wandb builds: Lightning's WandbLogger without the `anonymous` setting, which
Lightning passes on every run (as None) and wandb answers with a deprecation warning on the console that no
setting of ours can silence ("The anonymous setting has no effect")."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import WandbLogger as _LightningWandbLogger


class WandbLogger(_LightningWandbLogger):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:  # never set by andrea: a user's logger.wandb.anonymous stays
            self._wandb_init.pop("anonymous", None)
