"""The documentation site (mkdocs.yml) builds with every warning an error, and a browser shows its front page and
an API page generated from the docstrings."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_site_builds_strict_and_a_browser_shows_its_front_page_and_an_api_page(tmp_path, browser):
    from selenium.webdriver.common.by import By

    site = tmp_path / "site"
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    browser.get((site / "index.html").as_uri())
    assert browser.find_element(By.TAG_NAME, "h1").text == "andrea"
    nav = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav a") if a.text]
    assert "Reproductions" in nav and "The lens (andrea.lens)" in nav
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "article h2")]
    assert headings[:3] == ["Set-up", "A ten-minute tour", "Experiments"], headings  # taken from the README
    code = " ".join(block.text for block in browser.find_elements(By.CSS_SELECTOR, "article pre"))
    assert "andrea-inspect logs/induction/runs/<run>/checkpoints/last.ckpt" in code
    from andrea.train.experiments import summaries

    rows = browser.find_elements(By.CSS_SELECTOR, "article table tbody tr")
    assert {row.find_element(By.TAG_NAME, "td").text for row in rows} == set(summaries())  # one row per experiment
    browser.save_screenshot(str(tmp_path / "front.png"))
    browser.get((site / "api" / "lens" / "index.html").as_uri())
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".doc-heading")]
    assert any(h.startswith("run_with_cache") for h in headings), headings  # from the docstrings
    assert "Looking inside a network" in browser.find_element(By.CSS_SELECTOR, ".doc-contents").text
    browser.save_screenshot(str(tmp_path / "api.png"))
    assert (tmp_path / "front.png").stat().st_size > 10_000 and (tmp_path / "api.png").stat().st_size > 10_000
