"""result.json through RunResult (each status its own keys, read back equal) and the one atomic write."""

import json

import pytest

from andrea.utils.files import atomic_write
from andrea.utils.run_result import KEYS, RESULT_FILE, RunResult


def test_each_status_writes_its_own_keys_and_reads_back_equal(tmp_path):
    for status in ("completed", "interrupted", "failed", "killed"):
        result = RunResult(status, 1, str(tmp_path), ["attention=eager"], error="ConfigError: x", signal=2)
        path = result.write(tmp_path / RESULT_FILE)
        written = json.loads(path.read_text())
        assert tuple(written) == KEYS.get(status, KEYS["failed"])
        back = RunResult.read(path)
        assert back.as_dict() == written and back.status == status


@pytest.mark.parametrize("text", ["[1, 2]", '{"status": "completed", "os.system": 1}', "not json", '{"val_loss": 1}'])
def test_a_file_that_is_no_result_is_refused_in_one_line(tmp_path, text):
    path = tmp_path / RESULT_FILE
    path.write_text(text)
    with pytest.raises(ValueError, match="is not") as err:
        RunResult.read(path)
    assert "\n" not in str(err.value)


def test_an_interrupted_write_keeps_what_the_file_held_and_leaves_no_partial(tmp_path):
    path = tmp_path / "last.ckpt"
    path.write_text("the previous checkpoint")
    with pytest.raises(RuntimeError), atomic_write(path) as partial:
        partial.write_text("half")
        raise RuntimeError("the write stopped part-way")
    assert path.read_text() == "the previous checkpoint" and sorted(tmp_path.iterdir()) == [path]
    with atomic_write(path) as partial:
        partial.write_text("the next checkpoint")
    assert path.read_text() == "the next checkpoint" and sorted(tmp_path.iterdir()) == [path]
