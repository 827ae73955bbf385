"""The explorer page for a mechanism with signed weights (differential attention), opened in a browser:
the weights it reads back keep their sign, negative ones are drawn red, and the page says what they are."""

import pytest
import torch

from andrea.lens.explorer import explorer_page

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
    page.write_text(explorer_page(tokens, [weights], scores, "diff", meaning=MEANING, signed=True))
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
