"""What andrea sends a dashboard beyond Lightning's own scalars, one small adapter per logger:

    layout(roles, n_layer)   how the head-role scalars are grouped (TensorBoard's custom-scalar layout)
    image(key, drawn, step)  an attention map: its PNG (wandb uploads the file) and its pixels (TensorBoard's image)
    role_charts(history)     the head-role scores of every record as charts, a line per head (at the end: wandb's
                             line series, TensorBoard's figure)
    finish(status)           the logger's run closed, so the next job in this process starts its own

`dashboard(logger)` gives a logger its adapter: wandb, TensorBoard, and for any other logger (CSV, a user's) the
base one, which sends nothing beyond the scalars. A new logger is one adapter in ADAPTERS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning.pytorch.loggers import Logger, TensorBoardLogger, WandbLogger

from andrea.lens.heads import RoleHead

if TYPE_CHECKING:
    from andrea.train.lit.map_probe import DrawnMap

History = list[tuple[int, dict[RoleHead, float]]]  # (step, {(role, layer, head): score}) per record


class Dashboard:
    """A logger that shows scalars only (CSV, a logger andrea does not know)."""

    def __init__(self, logger: Logger) -> None:
        self.logger = logger

    def layout(self, roles: list[str], n_layer: int) -> None:
        """How the head-role scalars are grouped, where the dashboard groups them."""

    def image(self, key: str, drawn: DrawnMap, step: int) -> None:
        """An attention map (its PNG, and its pixels in memory), where the dashboard shows images."""

    def role_charts(self, history: History) -> None:
        """Every record's head-role scores as charts, where the dashboard draws its own."""

    def finish(self, status: str) -> None:
        self.logger.finalize(status)


class TensorBoardDashboard(Dashboard):
    logger: TensorBoardLogger

    def layout(self, roles: list[str], n_layer: int) -> None:
        """A "head roles" category, one multi-line chart per role and layer whose lines are that layer's heads."""
        self.logger.experiment.add_custom_scalars(grouped_layout(roles, n_layer))

    def image(self, key: str, drawn: DrawnMap, step: int) -> None:
        """The map's pixels as drawn, (H, W, 3) uint8: nothing read back from the PNG."""
        self.logger.experiment.add_image(key, drawn.pixels, global_step=step, dataformats="HWC")

    def role_charts(self, history: History) -> None:
        """Every role and layer as a chart whose lines are the heads, each its own colour, with a legend (an image:
        TensorBoard's custom scalars colour a run's lines alike)."""
        if history:
            figure = role_figure(history)
            self.logger.experiment.add_figure("head_roles/every_head", figure, global_step=history[-1][0])


class WandbDashboard(Dashboard):
    logger: WandbLogger

    def image(self, key: str, drawn: DrawnMap, step: int) -> None:
        self.logger.log_image(key=key, images=[str(drawn.path)], step=step)  # the PNG: wandb uploads the file

    def role_charts(self, history: History) -> None:
        if history:
            self.logger.experiment.log(grouped_charts(history))

    def finish(self, status: str) -> None:
        import wandb

        super().finish(status)
        wandb.finish(exit_code=0 if status == "success" else 1)


ADAPTERS: dict[type[Logger], type[Dashboard]] = {TensorBoardLogger: TensorBoardDashboard, WandbLogger: WandbDashboard}


def dashboard(logger: Logger) -> Dashboard:
    """The logger's adapter: its class's, or its nearest base class's, else the scalars-only one."""
    adapter = next((ADAPTERS[cls] for cls in type(logger).__mro__ if cls in ADAPTERS), Dashboard)
    return adapter(logger)


def grouped_layout(roles: list[str], n_layer: int) -> dict:
    """TensorBoard's custom-scalar layout: a "head roles" category, one multi-line chart per role and
    layer whose lines are that layer's heads (tags heads/<role>/L<l>H<h>)."""
    charts = {
        f"{role} · layer {layer}": ["Multiline", [rf"heads/{role}/L{layer}H\d+$"]]
        for role in roles
        for layer in range(n_layer)
    }
    return {"head roles": charts}


def grouped_charts(history: History) -> dict[str, Any]:
    """wandb line-series charts, key head_roles/<role>_L<l>: x = the step, a line per head."""
    import wandb

    charts = {}
    for (role, layer), heads in sorted(_series(history).items()):
        steps = sorted({step for points in heads.values() for step, _ in points})
        ys = [[dict(points).get(step, float("nan")) for step in steps] for _, points in sorted(heads.items())]
        keys = [f"H{h}" for h in sorted(heads)]
        title = f"{role} · layer {layer}"
        charts[f"head_roles/{role}_L{layer}"] = wandb.plot.line_series(steps, ys, keys=keys, title=title, xname="step")
    return charts


def role_figure(history: History) -> Any:
    """A matplotlib figure: a panel per role and layer, x the step, a line per head with its own colour and a
    legend (the figure TensorBoard shows; wandb draws its own line series)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = sorted(_series(history).items())
    columns = min(4, len(series))
    rows = -(-len(series) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4 * columns, 3 * rows), dpi=100, squeeze=False, layout="constrained"
    )
    for ax, ((role, layer), heads) in zip(axes.flat, series, strict=False):
        for h, points in sorted(heads.items()):
            ax.plot(*zip(*points, strict=True), marker=".", label=f"L{layer}H{h}")
        ax.set(title=f"{role} · layer {layer}", xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[len(series) :]:
        ax.axis("off")
    return fig


def _series(history: History) -> dict[tuple[str, int], dict[int, list[tuple[int, float]]]]:
    """(role, layer) -> head -> its (step, score) points."""
    series: dict[tuple[str, int], dict[int, list[tuple[int, float]]]] = {}
    for step, scores in history:
        for (role, layer, head), value in scores.items():
            series.setdefault((role, layer), {}).setdefault(head, []).append((step, value))
    return series
