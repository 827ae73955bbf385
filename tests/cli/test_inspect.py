"""andrea-inspect on the run of each task family (MQAR, MAD's recall, flip-flop, modular addition), its data
rebuilt from the run's recorded config through andrea.data.catalog."""

import re

import pytest
from hydra.core.hydra_config import HydraConfig

from andrea.train.pipeline import train
from tests.compose import compose_train
from tests.lens.inspect_cli import run_inspect

SHORT = ["trainer.max_steps=2", "trainer.limit_val_batches=1", "logger=none", "callbacks.attention_maps=null"]
ROWS = ["data.num_train=128", "data.num_val=32"]
RUNS = {  # the experiment presets, a handful of rows and steps; modular addition's rows are its pairs
    "mqar": ROWS,  # evaluation sets at 2x and 4x the length: validation loaders beside the run's own
    "recall": ROWS,
    "flip_flop": ROWS,
    "modular_addition": [],
}
DEFAULT_RUN = ("mqar",)  # the others under -m slow (about 5 s each); tests/data rebuilds every task's data from a run


@pytest.mark.parametrize("task", [pytest.param(t, marks=() if t in DEFAULT_RUN else pytest.mark.slow) for t in RUNS])
def test_andrea_inspect_reads_the_run_of_each_task_family(task, tmp_path, monkeypatch, capsys):
    result = train(compose_train(tmp_path, [f"experiment={task}", *RUNS[task], *SHORT]))
    HydraConfig.instance().cfg = None
    assert result.status == "completed"
    capsys.readouterr()
    ckpt = tmp_path / "checkpoints" / "last.ckpt"
    code, out, err = run_inspect([str(ckpt)], monkeypatch, capsys)  # the input: the run's first validation row
    assert code == 0, err
    assert out.splitlines()[-1] == f"explorer: {ckpt.with_suffix('.inspect.html')}"
    assert re.search(r"mean over \d+ validation rows", ckpt.with_suffix(".inspect.html").read_text())
