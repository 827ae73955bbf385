"""The lens inside a token mixer: its documented points (docs/lens.md) hold the queries, keys and values as the
heads read them, the decay, the implied weights, the output gate and the state a cache keeps; an edit of the
state reaches the tokens generated next."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from andrea.lens.cache import hooks, run_with_cache
from andrea.models.gpt import GPT
from andrea.ops import gated_linear

MIXERS = ["linear", "retention", "gla", "mamba2"]


def _net(name: str) -> GPT:
    torch.manual_seed(0)
    mixer = {"name": name, "n_head": 4} | ({"gate": True} if name == "linear" else {})
    return GPT(vocab_size=17, max_context=32, n_layer=2, d_model=16, attention=dict(n_head=4), mixer=mixer,
               layout=[name, "attention"]).eval()  # fmt: skip


@pytest.mark.parametrize("name", MIXERS)
def test_the_points_hold_what_the_mixer_computes(name):
    net, ids = _net(name), torch.randint(0, 17, (2, 9))
    _, cache = run_with_cache(net, ids)
    point = "blocks.0.attn."
    q, k, v = (cache[point + hook].transpose(1, 2) for hook in ("hook_q", "hook_k", "hook_v"))  # (B, H, T, ·)
    g = cache.get(point + "hook_decay")  # linear attention has no decay
    assert q.shape[:3] == (2, 4, 9) and cache[point + "hook_gate"].shape[:3] == (2, 9, 4)
    layer: Any = net.mixers[0]
    if name == "linear":  # the normaliser's column rides in the state, last
        v = torch.cat((v, torch.ones_like(v[..., :1])), dim=-1)
    _, state = gated_linear.recurrent(q, k, v, g, 1.0 if name == "mamba2" else layer.scale)
    torch.testing.assert_close(cache[point + "hook_state"], state, rtol=1e-4, atol=1e-5)
    assert point + "hook_pattern" in net.hook_points()


@pytest.mark.parametrize("name", MIXERS)
def test_an_edit_of_the_state_reaches_generation(name):
    """A prompt's state zeroed as the cache takes it: the next token's logits are those of no prompt at all for
    the mixer layer, so they change; an edit that keeps the state changes nothing."""
    net, ids = _net(name), torch.randint(0, 17, (1, 8))

    def next_logits(edit=None):
        cache = net.new_cache()
        hooked = [] if edit is None else [("blocks.0.attn.hook_state", edit)]
        with torch.no_grad(), hooks(net, hooked):
            net(ids, cache=cache)
        with torch.no_grad():
            return net(ids[:, -1:], cache=cache)[0]

    untouched = next_logits()
    torch.testing.assert_close(next_logits(lambda state, point: state), untouched)
    assert not torch.allclose(next_logits(lambda state, point: torch.zeros_like(state)), untouched)


@pytest.mark.slow  # reason: trains a few steps, then starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_explorer_shows_a_mixed_layout_in_a_browser(browser, tmp_path, monkeypatch, capsys):
    """GLA then attention, 3 training steps: the page names both, draws every head of both layers (the GLA
    layer's implied weights on a signed scale) and attributes the prediction to the heads of both."""
    import sys

    from selenium.webdriver.common.by import By

    from andrea.cli import inspect as inspect_cli
    from andrea.train.pipeline import train
    from tests.compose import QUICK, compose_train

    layout = ["mixer=gla", "model.net.n_layer=2", "model.net.layout=[gla,attention]", "trainer.max_steps=3"]
    train(compose_train(tmp_path / "run", [*QUICK, *layout]))
    page = tmp_path / "explorer.html"
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    monkeypatch.setattr(sys, "argv", ["andrea-inspect", str(checkpoint), f"out={page}"])
    inspect_cli.main()
    capsys.readouterr()
    browser.get(page.as_uri())
    about = browser.find_element(By.CSS_SELECTOR, ".about").text
    assert about == "checkpoint last.ckpt · backend sdpa · mechanism gla + softmax · mask causal"
    names = [
        card.find_element(By.CSS_SELECTOR, ".name").text for card in browser.find_elements(By.CSS_SELECTOR, ".head")
    ]
    assert names == [f"L{layer}H{head}" for layer in range(2) for head in range(4)]
    table = browser.find_element(By.CSS_SELECTOR, "table.attribution").text
    rows = table.splitlines()
    assert rows[0] == "H0 H1 H2 H3 W_O bias" and [row.split()[:2] for row in rows[1:]] == [
        ["layer", "0"],
        ["layer", "1"],
    ]
    browser.save_screenshot(str(tmp_path / "mixed.png"))
