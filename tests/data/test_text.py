"""The text data module: token cache, splits, windows, and the files it refuses."""

import numpy as np
import pytest

from andrea.data.text import EXCERPT, TextDataModule
from andrea.data.tokenizers import GPT2Tokenizer


def module(tmp_path, **kwargs):
    return TextDataModule(cache_dir=str(tmp_path / "cache"), **{"seq_len": 32, "batch_size": 4, **kwargs})


def test_excerpt_tokenises_into_a_uint16_cache(tmp_path):
    data = module(tmp_path)
    data.setup()
    (cache,) = (tmp_path / "cache").glob("*.bin")
    assert cache.name.startswith("gpt2-") and data.tokens.dtype == np.uint16
    expected = GPT2Tokenizer().encode(EXCERPT.read_text())
    assert list(data.tokens[:50]) == expected[:50] and len(data.tokens) == len(expected) + 1  # + end of text
    assert data.tokens[-1] == 50256
    mtime = cache.stat().st_mtime_ns
    module(tmp_path).setup()  # same content, same tokenizer: the cache is reused
    assert cache.stat().st_mtime_ns == mtime and len(list((tmp_path / "cache").glob("*.bin"))) == 1


def test_windows_and_split(tmp_path):
    data = module(tmp_path, samples_per_epoch=16)
    data.setup()
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape == batch["labels"].shape == (4, 32)
    assert (batch["labels"][:, :-1] == batch["input_ids"][:, 1:]).all()  # next-token labels
    split = int(len(data.tokens) * 0.9)
    assert len(data.val_set) == (len(data.tokens) - split - 1) // 32
    first = data.val_set[0]["input_ids"].numpy()
    assert (first == data.tokens[split : split + 32]).all()
    again = module(tmp_path, samples_per_epoch=16)
    again.setup()
    assert (again.train_set[3]["input_ids"] == data.train_set[3]["input_ids"]).all()  # seeded


def test_with_bos_every_window_starts_with_the_end_of_text_id(tmp_path):
    data, plain = module(tmp_path, bos=True, samples_per_epoch=16), module(tmp_path, samples_per_epoch=16)
    data.setup(), plain.setup()
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape == batch["labels"].shape == (4, 32)
    assert (batch["input_ids"][:, 0] == 50256).all()  # the BOS, GPT-2's <|endoftext|>
    assert (batch["labels"][:, :-1] == batch["input_ids"][:, 1:]).all()  # the BOS predicts the window's first token
    split = int(len(data.tokens) * 0.9)
    first = data.val_set[0]
    assert (first["labels"].numpy() == data.tokens[split : split + 32]).all()  # 32 text tokens scored a window
    assert len(data.val_set) == (len(data.tokens) - split) // 32
    streams = data.streams(2, 40)
    assert streams.shape == (2, 40) and (streams[:, 0] == 50256).all()
    assert (streams[1, 1:].numpy() == data.tokens[split + 39 : split + 78]).all()  # consecutive held-out text
    assert (plain.streams(2, 40)[0].numpy() == data.tokens[split : split + 40]).all()  # without: text from the start
    with pytest.raises(ValueError, match=r"data\.bos=.?maybe.? must be true or false"):
        module(tmp_path, bos="maybe")


def test_folder_and_bytes_tokenizer(tmp_path):
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("hello " * 200)
    (folder / "sub" / "b.txt").write_text("world " * 200)
    data = module(tmp_path, path=str(folder), tokenizer="bytes")
    data.setup()
    assert data.vocab_size == 257 and len(data.tokens) == 2 * 1200 + 2
    assert list(data.tokens[:6]) == list(b"hello ")


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "holds no .txt file"),
        (lambda p: p.with_suffix(".txt").write_bytes(b"ok \xff\xfe bad"), "is not UTF-8 text \\(byte 3"),
        (lambda p: p.with_suffix(".txt").write_text(""), "corpus.txt is empty; give a file with text in it"),
        (lambda p: p.with_suffix(".txt").write_text("tiny text"), "too few for data.seq_len=32"),
    ],
)
def test_bad_text_is_refused(tmp_path, setup, message):
    target = tmp_path / "corpus"
    setup(target)
    path = target.with_suffix(".txt") if target.with_suffix(".txt").exists() else target
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        module(tmp_path, path=str(path)).setup()
    assert not list((tmp_path / "cache").glob(".*.partial"))  # nothing half-written left behind


def test_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="data.tokenizer='sentencepiece' is not one of gpt2, bytes"):
        module(tmp_path, tokenizer="sentencepiece")
    with pytest.raises(ValueError, match=r"data.val_fraction=1.5 must be a finite number > 0 and < 1"):
        module(tmp_path, val_fraction=1.5)


def test_every_epoch_draws_new_windows_and_a_resumed_epoch_the_same_ones():
    from andrea.data.sampler import EpochSampler

    sampler = EpochSampler(10_000, num_samples=64, seed=3)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert len(set(first)) == 64 and set(first) != set(second)  # a new draw, no repeats within an epoch
    again = EpochSampler(10_000, num_samples=64, seed=3)
    again.set_epoch(1)
    assert list(again) == second  # epoch e is a function of (seed, e): a fresh process draws the same
    small = EpochSampler(5, num_samples=12, seed=0)  # a corpus shorter than one epoch repeats windows
    assert len(list(small)) == 12 and set(small) <= set(range(5))


def test_the_cache_key_holds_every_file_s_name_and_boundary(tmp_path):
    """The cached tokens depend on where one file ends (an end-of-text token) and on the files themselves:
    the same bytes split otherwise, or a file renamed, is another cache, never the old tokens."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text, tokens = "the same bytes, split in two files. " * 8, {}
    for name, files in {
        "split at 100": {"a.txt": text[:100], "b.txt": text[100:]},
        "split at 150": {"a.txt": text[:150], "b.txt": text[150:]},
        "b renamed": {"a.txt": text[:150], "c.txt": text[150:]},
    }.items():
        for old in corpus.iterdir():
            old.unlink()
        for file, part in files.items():
            (corpus / file).write_text(part)
        data = module(tmp_path, path=str(corpus), tokenizer="bytes", seq_len=8)
        data.setup()
        tokens[name] = (data.cache.name, data.tokens.tolist())
    assert len({cache for cache, _ in tokens.values()}) == 3
    assert tokens["split at 100"][1] != tokens["split at 150"][1]  # the end-of-text token moved
    assert tokens["split at 150"][1] == tokens["b renamed"][1]  # the same tokens, cached under its own key


def test_a_cache_dir_that_cannot_be_written_names_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"data.cache_dir=/proc/andrea: the token cache cannot be written there \("):
        TextDataModule(cache_dir="/proc/andrea", seq_len=32, batch_size=4)


@pytest.mark.parametrize(
    "edit",
    [
        lambda meta: meta.update(tokens=meta["tokens"] // 2),  # half the tokens: half the corpus read
        lambda meta: meta.update(dtype="uint32"),  # every token misread
        lambda meta: meta.update(sha256="0" * 64),
        lambda meta: meta.pop("sha256"),  # a cache described before the hash was kept
    ],
)
def test_a_token_cache_whose_description_was_edited_is_made_again(tmp_path, edit):
    import json

    module(tmp_path).setup()
    (cache,) = (tmp_path / "cache").glob("*.bin")
    described = cache.with_suffix(".json")
    honest = json.loads(described.read_text())
    edited = dict(honest)
    edit(edited)
    described.write_text(json.dumps(edited))
    data = module(tmp_path)
    data.setup()
    assert json.loads(described.read_text()) == honest and len(data.tokens) == honest["tokens"]
    assert list((tmp_path / "cache").glob("*.bin")) == [cache]
