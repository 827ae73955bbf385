"""What each dashboard gets from the attention maps callback: TensorBoard's custom-scalar layout,
wandb's line-series charts of the head-role scores, and a map image for either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger, TensorBoardLogger, WandbLogger

from andrea.lens.heads import parse_head


def grouped_layout(roles: list[str], n_layer: int) -> dict:
    """TensorBoard's custom-scalar layout: a "head roles" category, one multi-line chart per role and
    layer whose lines are that layer's heads (tags heads/<role>/L<l>H<h>)."""
    charts = {
        f"{role} · layer {layer}": ["Multiline", [rf"heads/{role}/L{layer}H\d+$"]]
        for role in roles
        for layer in range(n_layer)
    }
    return {"head roles": charts}


def grouped_charts(history: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    """wandb line-series charts, key head_roles/<role>_L<l>: x = the step, a line per head."""
    import wandb

    series: dict[tuple[str, int], dict[int, list[tuple[int, float]]]] = {}
    for step, scores in history:
        for key, value in scores.items():
            _, role, head = key.split("/")
            layer, h = parse_head(head)
            series.setdefault((role, layer), {}).setdefault(h, []).append((step, value))
    charts = {}
    for (role, layer), heads in sorted(series.items()):
        steps = sorted({step for points in heads.values() for step, _ in points})
        ys = [[dict(points).get(step, float("nan")) for step in steps] for _, points in sorted(heads.items())]
        keys = [f"H{h}" for h in sorted(heads)]
        title = f"{role} · layer {layer}"
        charts[f"head_roles/{role}_L{layer}"] = wandb.plot.line_series(steps, ys, keys=keys, title=title, xname="step")
    return charts


def log_image(logger: Logger, key: str, path: Path, step: int) -> None:
    if isinstance(logger, WandbLogger):
        logger.log_image(key=key, images=[str(path)], step=step)
    elif isinstance(logger, TensorBoardLogger):
        from matplotlib.image import imread

        image = imread(path)[..., :3]  # (H, W, 3) floats in [0, 1]
        logger.experiment.add_image(key, image, global_step=step, dataformats="HWC")
