"""The attention-map PNGs: a near-square grid, position ticks or tokens, a named colour scale."""

import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from andrea.lens import grid_png, viz


def weights(H, T):
    return torch.softmax(torch.randn(H, T, T), dim=-1).tril()


@pytest.mark.parametrize("n_head, grid", [(4, (2, 2)), (12, (3, 4)), (1, (1, 1)), (6, (2, 3))])
def test_a_near_square_grid_of_heads(tmp_path, n_head, grid):
    layout = viz.grid_layout(n_head, 8, 8)
    assert (layout.rows, layout.columns) == grid
    image = Image.open(grid_png.save_attention_grid(weights(n_head, 8), tmp_path / "map.png"))
    assert 0.5 < image.height / image.width < 2  # readable at a dashboard card's width, not a strip


def test_position_ticks_in_a_window_and_the_named_scale():
    layout = viz.grid_layout(2, 40, 40, scale="row", start=100)
    assert [label for _, label in layout.x_ticks][:3] == ["100", "105", "110"]  # absolute positions of the window
    assert layout.colour_label == viz.SCALE_LABELS["row"] and not layout.tokens


def test_tokens_on_both_axes():
    tokens = [f"w{i}" for i in range(10)]
    layout = viz.grid_layout(1, 6, 6, start=4, tokens=tokens)
    assert [label for _, label in layout.x_ticks] == tokens[4:] == [label for _, label in layout.y_ticks]
    text = viz.grid_layout(1, 64, 64, tokens=[chr(65 + i % 26) for i in range(64)])  # a character model's context
    assert text.tokens and len(text.x_ticks) == 64  # every position labelled
    assert not viz.grid_layout(1, 200, 200, tokens=[str(i) for i in range(200)]).tokens  # too many: positions


def test_a_log_scale_shows_weights_near_one_over_t(tmp_path):
    """On a linear 0-1 scale uniform weights over 256 keys are 0.4% of the colour range: one dark square.
    On the log scale they sit well inside it, and a sharp head stands out from them."""
    uniform = torch.full((1, 256, 256), 1 / 256)
    log = viz.colour_values(uniform, viz.grid_layout(1, 256, 256, scale="log"))
    linear = viz.colour_values(uniform, viz.grid_layout(1, 256, 256, scale="linear"))
    assert linear.max() < 0.01 and 0.25 < log.min() < 0.75
    path = grid_png.save_attention_grid(uniform, tmp_path / "uniform.png")
    pixels = np.asarray(Image.open(path).convert("RGB"))
    assert (pixels == viz.colours(np.array([log[0, 0, 0]]))[0]).all(-1).sum() > 256 * 256 * 0.9  # the map's colour


def test_row_normalised_puts_every_row_s_largest_at_the_top():
    values = viz.colour_values(weights(2, 12), viz.grid_layout(2, 12, 12, scale="row"))
    assert np.allclose(values.max(axis=-1), 1.0)


def test_the_colour_bar_marks_decades_on_the_log_scale():
    layout = viz.grid_layout(1, 256, 256, scale="log")
    assert math.isclose(layout.floor, 0.1 / 256)  # below 1/T: uniform weights are not the floor's colour


def test_an_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="scale='viridis' must be one of log, row, linear"):
        viz.grid_layout(1, 4, 4, scale="viridis")


def test_map_files_are_named_in_one_place_and_read_from_the_folder_the_run_used(tmp_path):
    from andrea.cli.inspect_run import training_frames
    from andrea.lens.viz import map_file, parse_map_file
    from andrea.utils.run_result import RESULT_FILE, RunResult

    assert parse_map_file(map_file(2, 150)) == (2, 150) and map_file(2, 150) == "layer2_step000150.png"
    assert parse_map_file("layer2_step150.png.bak") is None and parse_map_file("notes.png") is None
    maps = tmp_path / "maps_elsewhere"  # callbacks.attention_maps.dirname=maps_elsewhere
    maps.mkdir()
    for layer, step in ((0, 50), (0, 0), (1, 0)):
        (maps / map_file(layer, step)).write_bytes(b"png")
    (maps / "notes.png").write_bytes(b"png")
    RunResult("completed", 0, "/where/the/run/was/trained", attention_maps="/where/it/was/maps_elsewhere").write(
        tmp_path / RESULT_FILE
    )  # a run dir moved since: the folder's name counts, not its old path
    frames = training_frames(tmp_path)
    assert {layer: [step for step, _ in found] for layer, found in frames.items()} == {0: [0, 50], 1: [0]}


def test_signed_weights_get_a_scale_symmetric_about_zero(tmp_path):
    """Differential attention's weights can be negative: 0 is the middle (white) of a red-white-blue bar
    running from -max|w| to +max|w|, whatever scale was asked for, and the subtitle says what they are."""
    w = torch.zeros(1, 6, 6)
    w[0, 1, 0], w[0, 2, 1] = -0.25, 0.5
    layout = viz.grid_layout(1, 6, 6, scale="log", limit=0.5)
    values = viz.colour_values(w, layout)
    assert values[0, 0, 0] == 0.5 and values[0, 2, 1] == 1.0 and values[0, 1, 0] == 0.25
    assert layout.colour_label == viz.SIGNED_LABEL
    path = grid_png.save_attention_grid(w, tmp_path / "signed.png", "diff", signed=True, subtitle="signed weights")
    pixels = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3)
    red, blue = viz.colours(np.array([0.0]), signed=True)[0], viz.colours(np.array([1.0]), signed=True)[0]
    assert red[0] > red[2] and blue[2] > blue[0]  # the ends: red below zero, blue above
    assert (pixels == viz.colours(np.array([1.0]), signed=True)[0]).all(-1).any()  # the largest weight is drawn blue


@pytest.mark.parametrize("signed", [False, True])
def test_a_masked_key_is_drawn_apart_from_a_weight_of_zero(tmp_path, signed):
    """Causal weights with one allowed weight exactly 0: the masked cells take MASKED_RGB, a colour neither scale
    has, the zero keeps its scale's colour, and the swatch under the colour bar names it."""
    T = 6
    w = weights(2, T)
    w[:, 3, 1] = 0.0  # allowed by the mask, weight exactly 0
    hidden = ~torch.ones(T, T, dtype=torch.bool).tril()
    path = grid_png.save_attention_grid(w, tmp_path / "causal.png", "causal", signed=signed, masked=hidden.numpy())
    pixels = np.asarray(Image.open(path).convert("RGB"))
    masked = (pixels == viz.MASKED_RGB).all(-1)
    ramp = viz.colours(np.linspace(0, 1, 256), signed)
    assert not (ramp == viz.MASKED_RGB).all(-1).any() and np.abs(ramp - viz.MASKED_RGB).sum(-1).min() > 40
    layout = viz.grid_layout(2, T, T, scale="log", limit=float(w.abs().max()) if signed else None)
    zero = viz.colours(viz.colour_values(torch.zeros(1, 1, 1), layout), signed)[0, 0, 0]
    assert (pixels == zero).all(-1).sum() > 0 and not np.array_equal(zero, viz.MASKED_RGB)
    per_panel = masked.sum() - 14 * 14  # the masked cells of both heads, and the legend's swatch
    px = viz.PANEL // T
    assert per_panel == 2 * int(hidden.sum()) * px * px
    unmasked = grid_png.save_attention_grid(w, tmp_path / "plain.png", "causal", signed=signed)
    assert not (np.asarray(Image.open(unmasked).convert("RGB")) == viz.MASKED_RGB).all(-1).any()


SENTENCE = (
    "implied weights: q·k under the state's decay, each earlier token's share of the output (rows need not sum to 1)"
)


@pytest.mark.parametrize("n_head, T, tokens", [(1, 6, True), (4, 12, False)])
def test_no_text_on_a_map_overlaps_other_text_or_runs_off_it(tmp_path, monkeypatch, n_head, T, tokens):
    """A mixer's subtitle is a sentence: on one head of six tokens it is wider than the picture. It is wrapped
    under the title, whole, and runs neither over a panel's name nor off the picture; nor does any other text."""
    drawn, text = [], ImageDraw.ImageDraw.text

    def recording(draw, xy, words, *args, **kwargs):
        box = draw.textbbox(xy, words, font=kwargs.get("font"), anchor=kwargs.get("anchor"))
        drawn.append((draw.im.size, words, box, kwargs.get("fill")))
        return text(draw, xy, words, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", recording)
    names = [f"w{i}" for i in range(T)] if tokens else None
    title = "layer 0 · step 50 · causal · deltanet · probe row 0"
    masked = ~np.tri(T, dtype=bool)
    path = grid_png.save_attention_grid(weights(n_head, T), tmp_path / "map.png", title, tokens=names,
                                        subtitle=SENTENCE, masked=masked)  # fmt: skip
    width, height = Image.open(path).size
    on_map = [(words, box, fill) for size, words, box, fill in drawn if size == (width, height)]  # no upright label
    subtitle = [words for words, _, fill in on_map if fill == "dimgray"]
    assert " ".join(subtitle) == SENTENCE  # whole, in as many lines as it takes
    for i, (words, (x0, y0, x1, y1), _) in enumerate(on_map):
        assert min(x0, y0) >= 0 and x1 <= width and y1 <= height, f"{words!r} runs off the {width}x{height} map"
        for other, (a0, b0, a1, b1), _ in on_map[i + 1 :]:
            assert x1 <= a0 or a1 <= x0 or y1 <= b0 or b1 <= y0, f"{words!r} overlaps {other!r}"
