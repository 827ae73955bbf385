"""Bad data and bad checkpoints, refused by the one validation step before anything is built,
each with one line that names the key and the fix; a refused resume leaves the run as it was.
(The config cases are test_config.REJECTED; docs/bad_input.md lists every case.)"""

import os
import shutil

import pytest
import torch

from andrea.train.config import ConfigError, validate
from tests.compose import compose_train

TEXT = ["data=text", "model=andrea-tiny", "data.seq_len=32"]


def refused(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(compose_train(tmp_path, overrides))
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    return str(err.value)


def test_missing_text_file(tmp_path):
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/nope.txt"],
        f"data.path={tmp_path}/nope.txt does not exist; give a text file or a folder of .txt files",
    )


def test_folder_without_text(tmp_path):
    (tmp_path / "corpus").mkdir()
    refused(tmp_path, [*TEXT, f"data.path={tmp_path}/corpus"], "holds no .txt file")


def test_empty_text_file(tmp_path):
    (tmp_path / "empty.txt").write_text("  \n")
    refused(tmp_path, [*TEXT, f"data.path={tmp_path}/empty.txt"], "empty.txt is empty; give a file with text in it")


def test_bytes_that_are_not_utf8(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/latin1.txt"],
        "latin1.txt is not UTF-8 text (byte 3: b'\\xe9 au'); convert it to UTF-8",
    )


def test_vocabulary_that_disagrees_with_the_tokenizer(tmp_path):
    refused(
        tmp_path,
        [*TEXT, "data.tokenizer=bytes", "data.vocab_size=300"],
        "data.vocab_size=300 but data.tokenizer=bytes has 257 ids",
    )


def test_a_character_device_is_never_read(tmp_path):
    refused(
        tmp_path,
        [*TEXT, "data.path=/dev/zero"],
        "data.path: /dev/zero is a character device, not a text file; give a regular file or a folder of them",
    )


def test_a_fifo_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")  # opening it to read would block until a writer came
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/pipe.txt"],
        f"data.path: {tmp_path}/pipe.txt is a FIFO, not a text file",
    )
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("text " * 100)
    os.mkfifo(tmp_path / "corpus" / "b.txt")  # inside a folder too
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/corpus"],
        f"data.path: {tmp_path}/corpus/b.txt is a FIFO, not a text file",
    )


def test_a_broken_link_in_a_folder(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("text " * 100)
    (tmp_path / "corpus" / "gone.txt").symlink_to(tmp_path / "deleted.txt")
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/corpus"],
        f"data.path: {tmp_path}/corpus/gone.txt is a link to nothing; remove it or point it at a text file",
    )


def test_a_socket_is_never_opened(tmp_path):
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s.txt"))
        refused(
            tmp_path,
            [*TEXT, f"data.path={tmp_path}/s.txt"],
            f"data.path: {tmp_path}/s.txt is a socket, not a text file",
        )


def test_more_text_than_max_bytes_needs_a_confirmation(tmp_path):
    (tmp_path / "big.txt").write_text("word " * 1000)
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/big.txt", "data.max_bytes=4096"],
        f"data.path={tmp_path}/big.txt holds 5,000 bytes of text, more than data.max_bytes=4,096; to tokenise it "
        "all, confirm with data.max_bytes=5000",
    )
    validate(compose_train(tmp_path, [*TEXT, f"data.path={tmp_path}/big.txt", "data.max_bytes=5000"]))  # confirmed


def test_text_too_short_for_the_window_is_refused_by_validation(tmp_path):
    (tmp_path / "short.txt").write_text("a few words of text, not many more")
    refused(
        tmp_path,
        [*TEXT, f"data.path={tmp_path}/short.txt"],
        "tokens: too few for data.seq_len=32 in both splits; give more text or a shorter seq_len",
    )


@pytest.fixture(scope="module")
def checkpoint(default_run):
    return default_run[1] / "checkpoints" / "last.ckpt"


def test_missing_checkpoint(tmp_path):
    refused(
        tmp_path,
        [f"ckpt_path={tmp_path}/last.ckpt"],
        f"ckpt_path={tmp_path}/last.ckpt does not exist; give a .ckpt file",
    )


def test_corrupt_checkpoint(tmp_path):
    (tmp_path / "junk.ckpt").write_bytes(os.urandom(4096))
    refused(tmp_path, [f"ckpt_path={tmp_path}/junk.ckpt"], "is truncated or corrupt (not a readable torch checkpoint)")


def test_truncated_checkpoint(tmp_path, checkpoint):
    data = checkpoint.read_bytes()
    (tmp_path / "half.ckpt").write_bytes(data[: len(data) // 2])
    refused(tmp_path, [f"ckpt_path={tmp_path}/half.ckpt"], "is truncated or corrupt")


def test_checkpoint_of_another_model(tmp_path, checkpoint):
    refused(
        tmp_path,
        [f"ckpt_path={checkpoint}", "model.net.d_model=64"],
        "holds a model with model.net.d_model=32, this run builds model.net.d_model=64; resume with the overrides",
    )


def test_checkpoint_of_another_mechanism_names_the_mechanism_not_its_options(tmp_path, checkpoint):
    refused(
        tmp_path,
        [f"ckpt_path={checkpoint}", "mechanism=qknorm"],
        "holds a model with model.net.attention.mechanism.name='softmax', this run builds "
        "model.net.attention.mechanism.name='qknorm'; resume with the overrides",  # was: ...mechanism.eps=None
    )


def test_checkpoint_not_from_andrea(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    refused(tmp_path, [f"ckpt_path={tmp_path}/foreign.ckpt"], "was not written by andrea-train (no andrea_net_config)")


class Payload:
    def __reduce__(self):
        return (open, ("/tmp/andrea-pickle-ran", "w"))  # what a malicious file would do


def test_checkpoint_carrying_pickled_code_is_never_run(tmp_path, checkpoint):
    state = torch.load(checkpoint, weights_only=True)
    state["hyper_parameters"] = {"net": Payload()}
    torch.save(state, tmp_path / "evil.ckpt")
    if os.path.exists("/tmp/andrea-pickle-ran"):
        os.remove("/tmp/andrea-pickle-ran")
    refused(
        tmp_path,
        [f"ckpt_path={tmp_path}/evil.ckpt"],
        "holds pickled objects beyond plain tensors and containers, refused unrun",
    )
    assert not os.path.exists("/tmp/andrea-pickle-ran")


def test_another_backend_may_resume_a_checkpoint(tmp_path, checkpoint):
    validate(compose_train(tmp_path, [f"ckpt_path={checkpoint}", "attention=eager"]))  # same weights, same function


def test_a_refused_resume_leaves_the_run_as_it_was(tmp_path, checkpoint):
    run = tmp_path / "run"
    shutil.copytree(checkpoint.parents[1] / "checkpoints", run / "checkpoints")
    before = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    (run / "checkpoints" / "last.ckpt").write_bytes(before["last.ckpt"][:1000])  # the file a crash left
    refused(
        run, [f"ckpt_path={run}/checkpoints/last.ckpt"], "is truncated or corrupt (not a readable torch checkpoint)"
    )
    after = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    assert after.keys() == before.keys() and after["last.ckpt"] == before["last.ckpt"][:1000]
    assert all(after[name] == before[name] for name in before if name != "last.ckpt")


def test_the_docs_list_every_case_with_its_message():
    import re
    from pathlib import Path

    from .test_config import REJECTED, as_pattern

    doc = (Path(__file__).parents[2] / "docs" / "bad_input.md").read_text()
    rows = [line.split(" | ") for line in doc.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert [int(row[0].strip("| ")) for row in rows] == list(range(1, len(rows) + 1))  # numbered, none lost
    messages = {row[3].strip("`"): row[4].rstrip(" |") for row in rows}
    for overrides, message in REJECTED:  # every config case, with the message the test expects
        documented = messages[" ".join(overrides)]
        assert re.search(as_pattern(message), documented), (overrides, documented)
