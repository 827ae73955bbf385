"""One straight path: compose, check, build, fit. The default run checks its config once (andrea.train.checks),
before anything is built, then builds its data module, LightningModule, network, attention backend and mask
once each, and trains those very parts."""

import functools
from collections import Counter

from andrea.attention.backends.sdpa import SDPABackend
from andrea.attention.masks.causal import Causal
from andrea.data.tasks import SyntheticTaskDataModule
from andrea.models.toy import ToyModel
from andrea.train import config
from andrea.train.lit.module import LanguageModelModule
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train


def test_the_default_run_checks_once_then_builds_each_part_once(tmp_path, monkeypatch):
    built: Counter[str] = Counter()
    events: list[str] = []
    check = config.check_config

    def counted_check(cfg, *args):
        events.append("check")
        checked = check(cfg, *args)
        events.append("checked")
        return checked

    monkeypatch.setattr(config, "check_config", counted_check)
    for cls in (SyntheticTaskDataModule, LanguageModelModule, ToyModel, SDPABackend, Causal):
        init = cls.__init__

        @functools.wraps(init)  # keeps the signature the key checks read
        def counted(self, *args, init=init, name=cls.__name__, **kwargs):
            built[name] += 1
            events.append(name)
            init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counted)
    result = train(compose_train(tmp_path, [*QUICK, "model.net.n_layer=2", "trainer.max_steps=3"]))
    assert result.status == "completed" and result.global_step == 3
    assert events.count("check") == 1
    # the checks build the backend and mask every layer shares (and check them); the run's parts come after
    assert events[: events.index("checked") + 1] == ["check", "SDPABackend", "Causal", "checked"]
    assert built == {name: 1 for name in ("SyntheticTaskDataModule", "LanguageModelModule", "ToyModel",
                                          "SDPABackend", "Causal")}  # fmt: skip
