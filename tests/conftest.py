"""Shared fixtures and the parity-matrix report printed at the end of every run."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import torch
from hydra.core.hydra_config import HydraConfig
from hypothesis import settings

from andrea.testing.report import pytest_terminal_summary  # noqa: F401  # the parity matrix, as the kit prints it
from tests.compose import compose_train

# at most 2 threads, shared out among pytest-xdist's workers where several run at once (CI's -n 2): two workers of
# 2 threads each on 2 cores spend their time waiting for each other
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

# Triton decides once, when it is first imported, whether its language runs compiled or under its CPU
# interpreter. This machine has no GPU: Triton is imported here under the interpreter, and the variable
# is then removed, so that the suite runs in a user's environment and only tests marked
# `triton_interpreter` turn the triton backend's CPU path on (the `_triton_interpreter` fixture).
_user_setting = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"
try:
    import triton.language  # noqa: F401
except ImportError:  # the triton extra is optional
    pass
finally:  # the environment as the user's shell had it
    if _user_setting is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = _user_setting

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


@pytest.fixture(autouse=True)
def _triton_interpreter(request, monkeypatch):
    """Tests marked `triton_interpreter`, and those parametrized with the triton backend, run its kernels on CPU
    under Triton's interpreter (TRITON_INTERPRET=1 for that test only); every other test sees the environment a
    user's shell has. Which tests are slow their own markers say (the kit's cells: andrea.testing.cost)."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if request.node.get_closest_marker("triton_interpreter") or "triton" in params.values():
        monkeypatch.setenv("TRITON_INTERPRET", "1")


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


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """Each test composes its own config; none inherits the previous test's Hydra state."""
    yield
    HydraConfig.instance().cfg = None


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """The default andrea-train run (repetition task, 3 epochs, wandb offline), run once."""
    from andrea.train.pipeline import train

    run_dir = tmp_path_factory.mktemp("default_run")
    result = train(compose_train(run_dir))
    return result, run_dir


@pytest.fixture(scope="session")
def induction_run(tmp_path_factory):
    """experiment=induction on eager (two layers: a previous-token head, then induction heads), run once."""
    from andrea.train.pipeline import train

    run_dir = tmp_path_factory.mktemp("induction_run")
    result = train(compose_train(run_dir, ["experiment=induction", "attention=eager", "logger=none"]))
    HydraConfig.instance().cfg = None
    return result, run_dir
