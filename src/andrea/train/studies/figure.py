"""A study's figure: one row of panels drawn off-screen, each gridded and given its legend, saved as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal


def panels(count: int, width: float, height: float = 3.8) -> tuple[Any, list[Any]]:
    """A figure `width` by `height` inches holding a row of `count` panels, and the panels, left to right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, count, figsize=(width, height), dpi=100, layout="constrained", squeeze=False)
    return fig, list(axes[0])


def save(fig: Any, path: Path, grid: Literal["both", "x", "y"] = "both") -> None:
    """Grid every panel, give each panel that drew a labelled artist its legend (unless it has one), write the
    figure to `path` and free it."""
    import matplotlib.pyplot as plt

    for ax in fig.axes:
        ax.grid(alpha=0.3, axis=grid)
        if ax.get_legend() is None and ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=8)
    fig.savefig(path)
    plt.close(fig)
