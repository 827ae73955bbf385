"""One build path: `validate` is a dry build whose parts the run trains, so the default run builds its
data module, LightningModule, network, attention backend and mask once each."""

import functools
from collections import Counter

from andrea.attention.backends.sdpa import SDPABackend
from andrea.attention.masks.causal import Causal
from andrea.data.tasks import SyntheticTaskDataModule
from andrea.models.toy import ToyModel
from andrea.train.lit.module import LanguageModelModule
from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train


def test_the_default_run_builds_each_part_once(tmp_path, monkeypatch):
    built: Counter[str] = Counter()
    for cls in (SyntheticTaskDataModule, LanguageModelModule, ToyModel, SDPABackend, Causal):
        init = cls.__init__

        @functools.wraps(init)  # keeps the signature the key checks read
        def counted(self, *args, init=init, name=cls.__name__, **kwargs):
            built[name] += 1
            init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counted)
    result = train(compose_train(tmp_path, [*QUICK, "model.net.n_layer=2", "trainer.max_steps=3"]))
    assert result.status == "completed" and result.global_step == 3
    assert built == {name: 1 for name in ("SyntheticTaskDataModule", "LanguageModelModule", "ToyModel",
                                          "SDPABackend", "Causal")}  # fmt: skip
