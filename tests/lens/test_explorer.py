"""The explorer page for a mechanism with signed weights (differential attention), opened in a browser:
the weights it reads back keep their sign, negative ones are drawn red, and the page says what they are."""

import json

import pytest
import torch

from andrea.lens.explorer import About, View, explorer_page
from andrea.lens.viz import MASKED_RGB

MEANING = "differential weights (two softmax maps subtracted: signed, rows sum to 1 - λ)"


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_signed_weights_keep_their_sign_in_the_explorer(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    T = 6
    weights = torch.zeros(1, T, T)  # one layer, one head: query 4 reads key 3, cancels key 0
    weights[0, 4, 3], weights[0, 4, 0] = 0.8, -0.4
    page = tmp_path / "signed.html"
    tokens = [f"t{i}" for i in range(T)]
    scores = {"previous_token": torch.tensor([[0.5]])}
    about = About("signed.ckpt", "eager", "diff", "causal", MEANING, signed=True)
    page.write_text(explorer_page([View("this input", tokens, [weights], scores)], about))
    browser.get(page.as_uri())
    assert MEANING in browser.find_element(By.TAG_NAME, "body").text
    ActionChains(browser).move_to_element(browser.find_elements(By.CSS_SELECTOR, "#queries .tok")[4]).perform()
    shown = [float(s.get_attribute("data-weight")) for s in browser.find_elements(By.CSS_SELECTOR, "#keys .tok")]
    assert shown == pytest.approx(weights[0, 4].tolist(), abs=0.8 / 127.5)  # one byte over [-0.8, 0.8]
    assert browser.find_element(By.ID, "readout").text.startswith('L0H0: query "t4" (4) attends to "t3" (3) 0.80')
    red, green, blue = browser.execute_script(
        "const c = document.querySelector('.head canvas').getContext('2d');"
        "return Array.from(c.getImageData(0, 4, 1, 1).data).slice(0, 3);"
    )  # the cell of query 4, key 0
    assert red > blue + 60 and red > green  # negative: red
    browser.save_screenshot(str(tmp_path / "signed.png"))


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_explorer_s_panels_in_a_browser(induction_run, browser, tmp_path, monkeypatch, capsys):
    """On an induction run with L1H1 ablated: the page names the checkpoint, backend, mechanism and mask and marks
    the ablated head; a click enlarges a head and lists its composition; the mean view over the validation rows
    swaps the maps and the scores; masked cells are grey; the attribution adds up to the logit."""
    import re
    import sys

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from andrea.cli import inspect as inspect_cli

    _, run_dir = induction_run
    page = tmp_path / "explorer.html"
    monkeypatch.setattr(sys, "argv", ["andrea-inspect", str(run_dir / "checkpoints" / "last.ckpt"), "ablate=[L1H1]",
                                      f"out={page}"])  # fmt: skip
    inspect_cli.main()
    capsys.readouterr()
    browser.get(page.as_uri())
    assert browser.title == run_dir.name  # the run's name, not the checkpoint's
    best = json.loads((run_dir / "result.json").read_text())["verdict"]["best"]
    assert browser.find_element(By.ID, "selected").text == best  # opened on the run's best induction head
    assert f"opened on {best}: the run's best induction head" in browser.find_element(By.TAG_NAME, "body").text
    about = browser.find_element(By.CSS_SELECTOR, ".about").text
    assert about == "checkpoint last.ckpt · backend eager · mechanism softmax · mask causal · ablated (zero): L1H1"
    ablated = browser.find_elements(By.CSS_SELECTOR, ".head.ablated")
    assert [card.find_element(By.CSS_SELECTOR, ".name").text for card in ablated] == ["L1H1 ablated (zero)"]
    cards = browser.find_elements(By.CSS_SELECTOR, ".head")
    cards[6].click()  # L1H2
    assert browser.find_element(By.ID, "big-title").text == "L1H2 · this input"
    composition = browser.find_element(By.ID, "composition").text
    assert re.match(r"L1H2 · Q: reads (L0H\d \d\.\d\d, ){2}L0H\d \d\.\d\d · K: reads L0H", composition), composition
    corner = (
        "const c = document.getElementById('big').getContext('2d'); return Array.from(c.getImageData(5, 0, 1, 1).data)"
    )
    assert browser.execute_script(corner)[:3] == list(MASKED_RGB)  # query 0 may not see key 5: the masked grey
    before = cards[6].find_element(By.CSS_SELECTOR, ".scores").text
    browser.find_element(By.CSS_SELECTOR, "input[name=view][value='1']").click()
    assert browser.find_element(By.ID, "big-title").text == "L1H2 · mean over 64 validation rows"
    after = cards[6].find_element(By.CSS_SELECTOR, ".scores").text
    assert after != before and float(after.split("ind ")[1]) > 0.9  # an induction head over every row too
    ActionChains(browser).move_to_element(browser.find_elements(By.CSS_SELECTOR, "#queries .tok")[20]).perform()
    assert browser.find_element(By.ID, "readout").text.startswith('L1H2: query "20" (20) attends to')
    table = browser.find_element(By.CSS_SELECTOR, "table.attribution").text
    cells = [float(x) for x in re.findall(r"[+-]\d+\.\d\d", table)]
    prose = browser.find_element(By.XPATH, "//h2[text()='Direct logit attribution']/following-sibling::p").text
    found = re.search(r"add up to the logit, (-?\d+\.\d\d)", prose)
    assert found, prose
    total = float(found[1])
    rest = [float(x) for x in re.findall(r"[+-]\d+\.\d\d", prose.split("logit,")[1][6:])]
    assert sum(cells) + sum(rest) == pytest.approx(total, abs=0.05)  # each shown to two places
    assert table.splitlines()[2].split()[3] == "+0.00"  # L1H1, ablated, writes nothing
    browser.save_screenshot(str(tmp_path / "explorer-mean.png"))


def _two_layer_view(name: str, T: int, tokens: list[str]) -> View:
    """2 layers of 2 heads, uniform causal weights; the run chose L1H0 for induction, L1H1 scores higher here."""
    weights = [torch.ones(2, T, T).tril() / torch.arange(1, T + 1).view(T, 1) for _ in range(2)]
    scores = {
        "previous_token": torch.tensor([[0.1, 0.8], [0.2, 0.3]]),
        "induction": torch.tensor([[0.0, 0.1], [0.7, 0.9]]),
    }
    best = {"previous_token": ("L0H1", 0.8), "induction": ("L1H1", 0.9)}
    return View(name, tokens, weights, scores, best=best)


def test_the_page_is_titled_with_the_run_s_name_else_the_checkpoint_s():
    view = _two_layer_view("this input", 4, ["a", "b", "c", "d"])
    named = explorer_page([view], About("last.ckpt", run="induction-eager-lr3e-3"))
    assert "<title>induction-eager-lr3e-3</title>" in named and "<h1>induction-eager-lr3e-3</h1>" in named
    assert "<title>model.safetensors</title>" in explorer_page([view], About("model.safetensors"))  # no run


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_page_says_why_it_opens_on_its_head_and_labels_the_enlarged_map(browser, tmp_path):
    """The run chose L1H0 (over its probe rows); on this input L1H1 scores higher: the page says why it opened on
    L1H0 and names each role's best on this input, a click away. The enlarged map's rows and columns are labelled
    with their positions and tokens, each label centred on its row or column and none overlapping another: every
    position on 32 tokens, a round step of them on 200."""
    from selenium.webdriver.common.by import By

    short = [f"w{i}" for i in range(32)]
    long = [f"token{i}" for i in range(200)]
    why = "the run's best induction head, what its task needs (an induction head in a layer >= 1)"
    about = About("last.ckpt", start="L1H0", start_why=why, run="induction-run")
    views = [_two_layer_view("this input", 32, short), _two_layer_view("a longer input", 200, long)]
    page = tmp_path / "explorer.html"
    page.write_text(explorer_page(views, about))
    browser.get(page.as_uri())
    assert browser.title == "induction-run" == browser.find_element(By.TAG_NAME, "h1").text
    assert browser.find_element(By.ID, "selected").text == "L1H0"
    assert f"opened on L1H0: {why}, over the run's probe rows" in browser.find_element(By.TAG_NAME, "body").text
    best = browser.find_element(By.ID, "best")
    assert best.text == "Best head of each role on this input: prev L0H1 0.80 · ind L1H1 0.90"
    best.find_element(By.LINK_TEXT, "L1H1").click()
    assert browser.find_element(By.ID, "selected").text == "L1H1"
    browser.save_screenshot(str(tmp_path / "short.png"))
    _assert_ticks(browser, short, every=1)
    browser.find_element(By.CSS_SELECTOR, "input[name=view][value='1']").click()
    assert best.text.startswith("Best head of each role on a longer input: ")
    _assert_ticks(browser, long, every=None)
    browser.save_screenshot(str(tmp_path / "long.png"))


def _assert_ticks(browser, tokens: list[str], every: int | None) -> None:
    """The enlarged map's ticks on both axes: `every` position's (None: a round step's), each "<position> <token>"
    centred on its row (left of the map) or column (under it), no two overlapping."""
    box = "const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom];"
    left, top, right, bottom = browser.execute_script(f"const e = document.getElementById('big'); {box}")
    cell = (bottom - top) / len(tokens)
    for axis, start, end in (("rows", 1, 3), ("columns", 0, 2)):
        ticks = browser.execute_script(
            f"return Array.from(document.querySelectorAll('#big-{axis} span')).map(e => [e.textContent, "
            f"(() => {{ {box} }})()])"
        )
        positions = [int(text.split()[0]) for text, _ in ticks]
        step = every or positions[1]
        assert positions == list(range(0, len(tokens), step)) and 8 <= len(ticks) <= 40, positions
        for (text, rect), j in zip(ticks, positions, strict=True):
            assert text == f"{j} {tokens[j]}"
            centre = (rect[start] + rect[end]) / 2 - (top if axis == "rows" else left)
            assert abs(centre - (j + 0.5) * cell) <= 1.0, (axis, text)
            assert rect[2] <= left if axis == "rows" else rect[1] >= bottom  # beside the map, not over it
        for (a, ra), (b, rb) in zip(ticks, ticks[1:], strict=False):
            assert ra[end] <= rb[start], f"{a!r} overlaps {b!r} on the {axis}"
