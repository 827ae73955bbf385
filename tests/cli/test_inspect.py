"""andrea-inspect on the run of each task family (MQAR, MAD's recall, flip-flop, modular addition), its data
rebuilt from the run's recorded config through andrea.data.catalog; and what a bare argument holding `=` is."""

import re
import shutil

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


@pytest.mark.parametrize(
    "text, message",
    [
        ("a=b and c=d", "prompt='a=b and c=d' must be space-separated token ids"),  # no setting's key: the input
        ("x=1", "prompt='x=1' must be space-separated token ids"),
        ("inptu=1 2", "Could not override 'inptu'"),  # a typo'd key is a setting, refused by name
        ("+colour=red", "colour is not a setting of the config"),  # Hydra's own syntax: a setting
    ],
)
def test_a_bare_input_is_the_input_unless_it_reads_as_a_setting(text, message, induction_run, monkeypatch, capsys):
    _, run_dir = induction_run
    code, _, err = run_inspect([str(run_dir / "checkpoints" / "last.ckpt"), text], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("andrea-inspect: error: ") and message in err


def test_a_checkpoint_whose_path_holds_an_equals_sign_is_the_checkpoint(induction_run, monkeypatch, capsys, tmp_path):
    """A sweep's run dirs may be named by their overrides (lr=0.1): the checkpoint's path is bare all the same."""
    _, run_dir = induction_run
    (tmp_path / "lr=0.1").mkdir()
    shutil.copy(run_dir / "checkpoints" / "last.ckpt", tmp_path / "lr=0.1" / "last.ckpt")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_inspect(["lr=0.1/last.ckpt", "1 2 3"], monkeypatch, capsys)
    assert code == 0, err
    assert out.strip().splitlines()[-1].startswith("explorer: lr=0.1/last.inspect-")
