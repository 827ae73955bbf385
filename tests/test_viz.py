"""The attention-map PNGs: a near-square grid, position ticks or tokens, a named colour scale."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from andrea import viz  # noqa: E402


def weights(H, T):
    return torch.softmax(torch.randn(H, T, T), dim=-1).tril()


def drawn(monkeypatch, **kwargs):
    """Draw, keeping the figure matplotlib made, to read its axes back."""
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


@pytest.mark.parametrize("n_head, grid", [(4, (2, 2)), (12, (3, 4)), (1, (1, 1)), (6, (2, 3))])
def test_a_near_square_grid_of_heads(tmp_path, monkeypatch, n_head, grid):
    figures = drawn(monkeypatch)
    viz.save_attention_grid(weights(n_head, 8), tmp_path / "map.png")
    shown = [ax for ax in figures[0].axes if ax.get_title().startswith("head ")]
    assert len(shown) == n_head
    rows = {round(ax.get_position().y0, 3) for ax in shown}
    assert len(rows) == grid[0]


def test_position_ticks_a_window_and_the_scale_in_the_colour_bar(tmp_path, monkeypatch):
    figures = drawn(monkeypatch)
    viz.save_attention_grid(weights(2, 40), tmp_path / "map.png", start=100, scale="row")
    ax = figures[0].axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:3] == ["100", "105", "110"]  # absolute positions of the window
    assert figures[0].axes[-1].get_ylabel() == viz.SCALE_LABELS["row"]  # the colour bar names its scale


def test_tokens_on_both_axes(tmp_path, monkeypatch):
    figures = drawn(monkeypatch)
    tokens = [f"w{i}" for i in range(10)]
    viz.save_attention_grid(weights(1, 6), tmp_path / "map.png", start=4, tokens=tokens)
    ax = figures[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens[4:]
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens[4:]


def test_a_log_scale_shows_weights_near_one_over_t():
    uniform = torch.full((1, 256, 256), 1 / 256)
    from matplotlib.colors import LogNorm, Normalize

    floor = min(1e-3, 0.1 / 256)
    # on a linear 0-1 scale 1/256 is 0.4% of the colour range: the dark square; on the log scale, over a quarter
    assert Normalize(0, 1)(1 / 256) < 0.01 and 0.25 < LogNorm(floor, 1)(uniform[0, 0, 0].item()) < 0.75


def test_an_unknown_scale_is_refused(tmp_path):
    with pytest.raises(ValueError, match="scale='viridis' must be one of log, row, linear"):
        viz.save_attention_grid(weights(1, 4), tmp_path / "map.png", scale="viridis")
