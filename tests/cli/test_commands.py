"""The command-line entry points and the attention config groups."""

import collections
import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from PIL import Image

from andrea.attention import MultiHeadSelfAttention, get_backend
from andrea.attention.masks.draw import KEPT_LABEL, KEPT_RGB, MASKED_LABEL
from andrea.cli import show_mask
from andrea.lens.viz import MASKED_RGB
from tests.read_only import read_only

CONF = Path(__file__).resolve().parents[2] / "conf"


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize(
    "heads",  # GQA in the default run (every backend and mask meets it); the others under -m slow
    [pytest.param(h, marks=() if h == "gqa" else pytest.mark.slow) for h in options("heads")],
)
@pytest.mark.parametrize("mask", options("mask"))
@pytest.mark.parametrize("attention", options("attention"))
def test_every_attention_option_composes_into_a_block(attention, mask, heads):
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("attention_demo", overrides=[f"attention={attention}", f"mask={mask}", f"heads={heads}"])
    if heads == "mla" and not get_backend(attention).capabilities.distinct_value_dim:
        with pytest.raises(InstantiationException, match=f"attention backend '{attention}' needs values of the que"):
            instantiate(cfg.block)  # latent attention's values are smaller than its queries and keys
        return
    block = instantiate(cfg.block)
    assert isinstance(block, MultiHeadSelfAttention)
    assert block.backend.name == attention and block.head_kind == heads and block.mask.kind == mask
    with torch.no_grad():
        assert block(torch.randn(1, 5, block.d_model))[0].shape == (1, 5, block.d_model)


def test_show_mask_prints_and_draws(tmp_path, capsys):
    out = tmp_path / "mask.png"
    show_mask.main(["causal & sliding_window(window=2)", "--length", "4", "-o", str(out)])
    printed = capsys.readouterr().out
    assert "(causal&sliding_window_2)\n■···\n■■··\n·■■·\n··■■\n" in printed
    assert out.read_bytes()[:4] == b"\x89PNG"


def masked_share(png: Path) -> float:
    """The share of a mask picture's painted cells in the maps' masked grey (against the kept colour)."""
    pixels = np.asarray(Image.open(png).convert("RGB"))
    masked, kept = ((pixels == rgb).all(-1).sum() for rgb in (MASKED_RGB, KEPT_RGB))
    return masked / (masked + kept)


def test_show_mask_paints_masked_keys_in_the_maps_grey_with_a_legend(tmp_path, monkeypatch, capsys):
    """The mask's picture speaks the attention maps' language: a masked key in the grey every map paints it
    (andrea.lens.viz.MASKED_RGB), a kept one in a colour of the maps' scale, and a legend naming both."""
    from matplotlib.figure import Figure

    figures: list[Any] = []  # the figures saved, as matplotlib gives them
    savefig = Figure.savefig

    def keeping(figure: Figure, *args: object, **kwargs: object) -> None:
        figures.append(figure)
        savefig(figure, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", keeping)
    out = tmp_path / "window.png"
    show_mask.main(["causal & sliding_window(window=2)", "--length", "4", "-o", str(out)])
    legend = figures[0].axes[0].get_legend()
    assert [text.get_text() for text in legend.get_texts()] == [KEPT_LABEL, MASKED_LABEL]
    swatches = [tuple(round(255 * c) for c in patch.get_facecolor()[:3]) for patch in legend.get_patches()]
    assert swatches == [KEPT_RGB, MASKED_RGB]
    assert masked_share(out) == pytest.approx(9 / 16, abs=0.01)  # 9 of the 16 cells are masked


@pytest.mark.slow  # reason: the demo times warm calls of each backend (about 3 s)
def test_the_demo_times_warm_calls_and_draws_its_mask_as_the_maps_do(tmp_path, monkeypatch, capsys):
    """A backend's first call pays for what it does once (flex compiles its kernel) and a call may stall on a busy
    machine: the table reports neither, timing after a warm-up call the median of several. Here every block's
    first call stalls, and 3 of its next 20: each backend is reported well under the stall and under the mean that
    the stalls would give. The demo's mask picture paints the masked keys in the maps' grey."""
    from andrea.cli import demo

    stall, calls, forward = 0.15, collections.Counter[int](), MultiHeadSelfAttention.forward

    def stalling(block, *args, **kwargs):
        calls[id(block)] += 1
        if calls[id(block)] in (1, 4, 5, 6):
            time.sleep(stall)
        return forward(block, *args, **kwargs)

    monkeypatch.setattr(MultiHeadSelfAttention, "forward", stalling)
    every = demo.backend_registry.names()
    monkeypatch.setattr(demo.backend_registry, "names", lambda: [n for n in every if n != "flex"])  # compiles for s
    monkeypatch.setattr(sys, "argv", ["andrea-demo", "seq_len=6", f"hydra.run.dir={tmp_path}"])
    demo.main()
    out = capsys.readouterr().out
    timed = {name: float(ms) for name, ms in re.findall(r"│ (\w+) +│ \S+ +│ \S+ +│ ([\d.]+) +│", out)}
    assert {"eager", "naive", "sdpa"} <= timed.keys()
    assert all(ms < stall * 1e3 / 20 for ms in timed.values()), out  # a third of the mean of 3 stalls in 20 calls
    assert f"warm ms (median of {demo.TIMED_CALLS})" in " ".join(out.split())
    assert masked_share(tmp_path / "mask.png") == pytest.approx(15 / 36, abs=0.01)  # causal, 6 positions


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sliding_window(window=-1)"], "mask.window=-1 must be a positive integer"),
        (["causal", "--length", "0"], "--length=0 must be a positive integer"),
        (["padding(lengths=3)"], "lengths must be a 1-D integer tensor"),
        (["blur"], "unknown mask strategy 'blur'"),
        (["causal" + " | causal" * 10_000], "a mask expression is at most 256 characters, got 90006"),
        (["sliding_window(window=99999999999999999999)"], "99999999999999999999 is out of range"),
    ],
)
def test_show_mask_refuses_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        show_mask.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_show_mask_given_a_folder_draws_inside_it_and_names_the_file(tmp_path, capsys):
    """As andrea-inspect's out=: the folder's namesake beside it (matplotlib's `<folder>.png`) is left alone."""
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics.png").write_bytes(b"the user's own picture")
    show_mask.main(["causal", "--length", "4", "-o", str(tmp_path / "pics")])
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {tmp_path / 'pics' / 'causal.png'}"
    assert (tmp_path / "pics" / "causal.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "pics.png").read_bytes() == b"the user's own picture"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["causal.png", "pics", "pics.png"]


@pytest.mark.parametrize(
    "output, message",
    [
        ("x.jpg", "-o {tmp}/x.jpg does not end in .png"),
        ("pics", "-o {tmp}/pics does not end in .png"),  # not a folder: matplotlib would write pics.png
        ("ro/x.png", "-o {tmp}/ro/x.png cannot be written (Read-only file system)"),
        ("/dev/full", "-o /dev/full is a character device"),
        ("link.png", "-o {tmp}/link.png is a link to {tmp}/gone/x.png, which does not exist"),
    ],
)
def test_show_mask_refuses_a_place_it_cannot_write_before_drawing(output, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "ro").mkdir()
    read_only(monkeypatch, tmp_path / "ro")
    (tmp_path / "link.png").symlink_to(tmp_path / "gone" / "x.png")
    before = sorted(tmp_path.rglob("*"))
    out = output if output.startswith("/") else str(tmp_path / output)
    with pytest.raises(SystemExit) as exit_info:
        show_mask.main(["causal", "-o", out])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""  # refused before the mask is printed or drawn
    assert captured.err == (
        f"andrea-show-mask: error: {message.format(tmp=tmp_path)}; give a writable .png file, or a folder to write "
        "it in\n"
    )
    assert sorted(tmp_path.rglob("*")) == before


def test_show_mask_refuses_a_length_too_long_to_draw_before_building_it(monkeypatch, capsys):
    """A 200,000-long mask is 40 GB of booleans: refused before any is made."""
    from andrea.attention.masks.base import Mask

    monkeypatch.setattr(Mask, "dense", lambda *args, **kwargs: pytest.fail("the mask was built"))
    with pytest.raises(SystemExit) as exit_info:
        show_mask.main(["causal", "--length", "200000"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "andrea-show-mask: error: --length=200000 is more than 256, past which the picture's cells are smaller "
        "than its pixels; draw at most 256 positions\n"
    )


def test_show_mask_on_a_disk_that_fills_keeps_the_picture_it_replaces(tmp_path, monkeypatch, capsys):
    from andrea.attention.masks import draw

    def fills_up(mask, path, **kwargs):
        Path(path).write_bytes(b"half a PNG")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    out = tmp_path / "causal.png"
    out.write_bytes(b"an earlier picture")
    monkeypatch.setattr(draw, "draw_mask", fills_up)
    with pytest.raises(SystemExit) as exit_info:
        show_mask.main(["causal", "-o", str(out)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"andrea-show-mask: error: -o {out} cannot be written (No space left on device); give a writable .png "
        "file, or a folder to write it in\n"
    )
    assert out.read_bytes() == b"an earlier picture" and [p.name for p in tmp_path.iterdir()] == ["causal.png"]


@pytest.mark.slow(reason="andrea-demo's process (~6 s); tests/test_console_scripts.py runs it in the default run")
def test_demo_console_script_from_another_folder(tmp_path):
    """The installed console script finds conf/ from any folder and writes its pictures."""
    script = Path(sys.executable).with_name("andrea-demo")
    result = subprocess.run(
        [str(script), "attention=eager", "mask=prefix_lm", "mask.prefix_len=3", "heads=mqa",
         "seq_len=6", f"hydra.run.dir={tmp_path}/run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "n_kv_head=1 (mqa), backend=eager, mask=prefix_lm_3" in result.stdout
    for name in ("mask.png", "attention_heads.png"):
        assert (tmp_path / "run" / name).read_bytes()[:4] == b"\x89PNG"
