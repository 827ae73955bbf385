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
    page.write_text(explorer_page([View("this input", tokens, [weights], scores)], about, "diff"))
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
