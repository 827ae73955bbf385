"""The attention-map PNGs: a near-square grid, position ticks or tokens, a named colour scale."""

from pathlib import Path

import pytest
import torch

from andrea import viz


def weights(H, T):
    return torch.softmax(torch.randn(H, T, T), dim=-1).tril()


@pytest.mark.parametrize("n_head, grid", [(4, (2, 2)), (12, (3, 4)), (1, (1, 1)), (6, (2, 3))])
def test_a_near_square_grid_of_heads(tmp_path, n_head, grid):
    figure = viz.attention_figure(weights(n_head, 8))
    figure.savefig(tmp_path / "map.png")  # lays it out
    shown = [ax for ax in figure.axes if ax.get_title().startswith("head ")]
    assert len(shown) == n_head
    rows = {round(ax.get_position().y0, 3) for ax in shown}
    assert len(rows) == grid[0]


def test_position_ticks_a_window_and_the_scale_in_the_colour_bar(tmp_path):
    figure = viz.attention_figure(weights(2, 40), start=100, scale="row")
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[:3] == ["100", "105", "110"]  # absolute positions of the window
    assert figure.axes[-1].get_ylabel() == viz.SCALE_LABELS["row"]  # the colour bar names its scale
    path = viz.save_attention_grid(weights(2, 40), tmp_path / "map.png", start=100, scale="row")
    assert Path(path).read_bytes()[:4] == b"\x89PNG"


def test_tokens_on_both_axes():
    tokens = [f"w{i}" for i in range(10)]
    ax = viz.attention_figure(weights(1, 6), start=4, tokens=tokens).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens[4:]
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens[4:]


def test_a_log_scale_shows_weights_near_one_over_t():
    uniform = torch.full((1, 256, 256), 1 / 256)
    from matplotlib.colors import LogNorm, Normalize

    floor = min(1e-3, 0.1 / 256)
    # on a linear 0-1 scale 1/256 is 0.4% of the colour range: the dark square; on the log scale, over a quarter
    assert Normalize(0, 1)(1 / 256) < 0.01 and 0.25 < LogNorm(floor, 1)(uniform[0, 0, 0].item()) < 0.75


def test_an_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="scale='viridis' must be one of log, row, linear"):
        viz.attention_figure(weights(1, 4), scale="viridis")
