"""The house's layers as a user meets them: the zoo, the kit and the model files import without Hydra or
Lightning (in a fresh interpreter: this suite has imported both long ago), and composing andrea's configs
registers what Hydra needs, whoever composes."""

import subprocess
import sys

LIGHT = ["andrea", "andrea.attention", "andrea.ops", "andrea.core.plugins", "andrea.testing", "andrea.models.gpt",
         "andrea.models.generate", "andrea.models.files.load", "andrea.bench.timing",
         "andrea.data.tokenizers"]  # fmt: skip
HEAVY = {"hydra", "omegaconf", "lightning", "pytorch_lightning", "torchmetrics"}


def test_the_lower_layers_import_neither_hydra_nor_lightning():
    code = f"import sys\nfor m in {LIGHT!r}: __import__(m)\nprint(*sorted({{m.split('.')[0] for m in sys.modules}}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "andrea" in loaded and "torch" in loaded
    assert loaded.isdisjoint(HEAVY), f"{', '.join(LIGHT)} pulled in {', '.join(sorted(loaded & HEAVY))}"


def test_composing_andrea_s_configs_anywhere_registers_its_resolvers():
    """A notebook's compose() of pkg://andrea.conf, with nothing of andrea imported first."""
    code = (
        "from hydra import compose, initialize_config_module\n"
        "from omegaconf import OmegaConf\n"
        "with initialize_config_module(config_module='andrea.conf', version_base='1.3'):\n"
        "    cfg = compose('train', overrides=['experiment=shakespeare-chars'])\n"
        "print(OmegaConf.has_resolver('andrea.run_name'), cfg.data.tokenizer, cfg.data.vocab_size)"
    )  # data.vocab_size is andrea.tokenizer_vocab's (256 bytes and an end-of-text token); data.path, the
    # corpus (an optional install), is left unresolved
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "bytes", "257"]
