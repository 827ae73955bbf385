"""Shared fixtures and the parity-matrix report printed at the end of every run."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import torch
from hypothesis import settings

from andrea.testing.report import pytest_terminal_summary  # noqa: F401  # the parity matrix, as the kit prints it

torch.set_num_threads(min(2, os.cpu_count() or 1))

# The triton backend's kernels run on CPU under Triton's interpreter, which Triton reads when the
# kernels are defined: before any test imports andrea.attention.backends.triton.
os.environ.setdefault("TRITON_INTERPRET", "1")

# wandb: offline, quiet, and nothing written to HOME
_WANDB_HOME = tempfile.mkdtemp(prefix="andrea-tests-wandb-")
for _key, _value in {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "WANDB_DIR": _WANDB_HOME,
    "WANDB_CACHE_DIR": _WANDB_HOME,
    "WANDB_CONFIG_DIR": _WANDB_HOME,
    "WANDB_DATA_DIR": _WANDB_HOME,
}.items():
    os.environ[_key] = _value


def pytest_unconfigure(config):
    shutil.rmtree(_WANDB_HOME, ignore_errors=True)  # the run's wandb home goes with the run


settings.register_profile("andrea", deadline=None, max_examples=40, derandomize=True)
settings.load_profile("andrea")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium driven by ChromeDriver (Debian's packages; .ci/run installs them), 1280 x 900."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.hookimpl(tryfirst=True)  # before -m 'not slow' deselects
def pytest_collection_modifyitems(config, items):
    """The triton backend's bfloat16 and ALiBi cells of the kit run under -m slow: Triton's interpreter is
    slow (tests/attention/test_triton_backend.py checks ALiBi over several blocks in the default run)."""
    for item in items:
        triton_cell = item.name.startswith(("test_parity[triton-", "test_parity_with_alibi[triton-"))
        if triton_cell and ("-bfloat16-" in item.name or item.name.startswith("test_parity_with_alibi")):
            item.add_marker(pytest.mark.slow)
