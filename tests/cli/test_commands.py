"""The command-line entry points and the attention config groups."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from andrea.attention import MultiHeadSelfAttention, get_backend
from andrea.cli import show_mask

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
