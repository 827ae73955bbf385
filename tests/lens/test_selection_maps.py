"""A layer that chooses its keys from the data, as its maps draw it: the weights dense attention would give on the
layer's own input, the keys its selection left out pale, the masked ones grey, in the PNG maps and in the
explorer (opened in a browser)."""

import copy

import numpy as np
import pytest
import torch

from andrea.lens.explorer import About, explorer_page, input_view
from andrea.lens.grid_png import render_attention_grid
from andrea.lens.selection_maps import selection_maps
from andrea.lens.viz import MASKED_RGB, colour_values, colours, faded, grid_layout
from andrea.models.gpt import GPT

T = 16


def sparse_then_dense(selection="dsa"):
    """Two layers: the first chooses its keys (DSA's top 4, or MoBA's blocks), the second is dense."""
    torch.manual_seed(0)
    settings = {"dsa": {"name": "dsa", "topk": 4, "index_heads": 2, "index_head_dim": 8},
                "moba": {"name": "moba", "block_size": 4, "topk_blocks": 2}}[selection]  # fmt: skip
    kinds = {"sparse": {"mixer": "attention", "selection": settings}, "dense": {"mixer": "attention"}}
    return GPT(vocab_size=32, max_context=T, n_layer=2, d_model=32, position="rope",
               attention={"n_head": 4, "backend": "eager"}, layout=["sparse", "dense"], kinds=kinds).eval()  # fmt: skip


@pytest.mark.parametrize("selection", ["dsa", "moba"])
def test_a_selection_s_map_is_the_dense_map_of_its_own_input_with_the_keys_it_left_out(selection):
    """The layer without its selection, run on the input the layer had, gives the dense weights; the keys left out
    are those the mask allows and hook_selected did not keep; the dense layer has no entry."""
    net = sparse_then_dense(selection)
    ids = torch.randint(0, 32, (2, T))
    layer = net.blocks[0].mixer
    seen: dict[str, torch.Tensor] = {}
    layer.points["hook_selected"].add(lambda value, point: seen.__setitem__("chosen", value))
    layer.register_forward_pre_hook(lambda module, args: seen.__setitem__("x", args[0]))
    with torch.no_grad():
        net(ids)
    maps = selection_maps(net, ids)
    assert list(maps) == [0]
    dense = copy.deepcopy(layer)
    dense.selection = None
    with torch.no_grad():
        expected = dense(seen["x"], return_weights=True)[1]
    torch.testing.assert_close(maps[0].dense, expected)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.equal(maps[0].left_out, (causal & ~seen["chosen"]).expand(2, 4, T, T))
    assert maps[0].left_out.any() and not (maps[0].left_out & ~causal).any()


def test_the_png_map_paints_chosen_keys_by_weight_left_out_ones_pale_and_masked_ones_grey():
    """A left-out key's weight colour faded is in the picture (and not in the same map drawn without marking it), a
    chosen key's colour and the masked grey are, and the legend names the pale."""
    net = sparse_then_dense()
    maps = selection_maps(net, torch.randint(0, 32, (1, T)))
    weights, left_out = maps[0].dense[0].numpy(), maps[0].left_out[0].numpy()
    masked = ~np.tril(np.ones((T, T), dtype=bool))
    image = np.asarray(render_attention_grid(weights, masked=masked, left_out=left_out))
    plain = np.asarray(render_attention_grid(weights, masked=masked))
    expected = colours(colour_values(weights, grid_layout(4, T, T, "log")))  # (H, T, T, 3)
    h, t, s = (int(i) for i in np.argwhere(left_out)[-1])
    pale = faded(expected[h, t, s])
    assert _has(image, pale) and not _has(plain, pale)
    chosen = np.argwhere(~left_out & ~masked)[-1]
    assert _has(image, expected[tuple(chosen)]) and _has(image, np.array(MASKED_RGB))


def _has(image: np.ndarray, rgb: np.ndarray) -> bool:
    return bool((image == rgb).all(-1).any())


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_explorer_draws_the_keys_a_selection_left_out_pale(browser, tmp_path):
    """The sparse layer's head map in the page: a left-out cell pale, a chosen one in its weight's colour, a masked
    one grey; the legend names the pale; hovering names a left-out key as left out."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    net = sparse_then_dense()
    ids = torch.randint(0, 32, (1, T))
    view = input_view(net, ids, [f"t{i}" for i in range(T)])
    assert view.left_out is not None and view.left_out[0].any() and not view.left_out[1].any()
    page = tmp_path / "sparse.html"
    page.write_text(explorer_page([view], About("sparse.ckpt", "eager", "softmax", "causal", run="sparse")))
    browser.get(page.as_uri())
    assert "left out by the selection" in browser.find_element(By.CSS_SELECTOR, ".legend").text
    h, t, s = (int(i) for i in torch.nonzero(view.left_out[0])[-1])
    kept = int(torch.nonzero(~view.left_out[0][h, t] & (torch.arange(T) <= t))[0])
    cells = browser.execute_script(
        f"const c = document.querySelectorAll('.head canvas')[{h}].getContext('2d');"
        f"return [[{s}, {t}], [{kept}, {t}], [{T - 1}, 0]].map(([x, y]) =>"
        " Array.from(c.getImageData(x, y, 1, 1).data).slice(0, 3));"
    )  # a left-out key, a chosen key, a masked key of head h (layer 0's canvases come first)
    layout = grid_layout(4, T, T, "log")
    shade = np.round(colour_values(view.weights[0][h].numpy(), layout) * 255).astype(int)
    lut = colours(np.linspace(0, 1, 256))
    assert cells[0] == faded(lut[shade[t, s]]).tolist()
    assert cells[1] == lut[shade[t, kept]].tolist()
    assert cells[2] == list(MASKED_RGB)
    browser.find_elements(By.CSS_SELECTOR, ".head")[h].click()
    ActionChains(browser).move_to_element(browser.find_elements(By.CSS_SELECTOR, "#queries .tok")[t]).perform()
    key = browser.find_elements(By.CSS_SELECTOR, "#keys .tok")[s]
    assert "left out by the selection" in key.get_attribute("title")
    browser.save_screenshot(str(tmp_path / "sparse.png"))
