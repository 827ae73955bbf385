"""The offline tokenizers: GPT-2's real BPE from checksummed local files, and bytes."""

import shutil

import pytest

from andrea.data.tokenizers import ByteTokenizer, GPT2Tokenizer, _packaged_gpt2_files


@pytest.fixture(scope="module")
def gpt2():
    return GPT2Tokenizer()


def test_gpt2_known_ids(gpt2):
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.encoding.n_vocab == gpt2.vocab_size == 50257
    assert gpt2.encoding.encode("<|endoftext|>", allowed_special="all") == [50256] == [gpt2.eot_id]


def test_gpt2_round_trip(gpt2):
    text = "To be, or not to be: that is the question.\n  Ünïcödé — ok?"
    assert gpt2.decode(gpt2.encode(text)) == text
    assert gpt2.encode("<|endoftext|>") != [gpt2.eot_id]  # a special token in data stays text


def test_missing_and_altered_files(tmp_path):
    packaged = _packaged_gpt2_files()
    assert packaged is not None
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(packaged / name, tmp_path / name)
    assert GPT2Tokenizer(tmp_path).encode("Hello world") == [15496, 995]
    with open(tmp_path / "vocab.bpe", "ab") as f:
        f.write(b"\n")
    with pytest.raises(ValueError, match="vocab.bpe is not GPT-2's \\(sha256 "):
        GPT2Tokenizer(tmp_path)
    (tmp_path / "encoder.json").unlink()
    with pytest.raises(FileNotFoundError, match="encoder.json is missing"):
        GPT2Tokenizer(tmp_path)


def test_bytes_round_trip():
    tokenizer = ByteTokenizer()
    ids = tokenizer.encode("naïve")
    assert ids == list("naïve".encode()) and max(ids) < 256
    assert tokenizer.decode(ids + [tokenizer.eot_id]) == "naïve"
