"""Pictures of attention: text heatmaps for the terminal, PNG grids for files and dashboards."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

SHADES = " ░▒▓█"


def weights_as_text(weights: Tensor) -> str:
    """(T, S) weights in [0, 1] as shaded characters, one row per query."""
    levels = (weights.clamp(0, 1) * (len(SHADES) - 1)).round().long().tolist()
    return "\n".join("".join(SHADES[level] * 2 for level in row) for row in levels)


def save_attention_grid(weights: Tensor, path: str | Path, title: str = "", columns: int = 4) -> str:
    """(H, T, S) per-head weights as a grid of heatmaps with one shared colour bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_head = weights.shape[0]
    columns = min(columns, n_head)
    rows = -(-n_head // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(2.4 * columns + 1.0, 2.4 * rows + 0.4), squeeze=False, dpi=100, layout="constrained"
    )
    for h, ax in enumerate(axes.flat):
        if h >= n_head:
            ax.set_axis_off()
            continue
        image = ax.imshow(weights[h].float().cpu().numpy(), cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_xlabel("key")
    axes[0, 0].set_ylabel("query")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return str(path)
