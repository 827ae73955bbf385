"""andrea-sample: text from a checkpoint or a safetensors export, settings refused in one line."""

import re
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from andrea.cli.app import SettingError
from andrea.cli.prompt import encode_prompt, pick_tokenizer
from andrea.cli.sample import check_settings
from andrea.models.files.checkpoint import export_checkpoint
from andrea.models.files.load import load_any

SAMPLE = [sys.executable, "-m", "andrea.cli.sample"]
DEFAULTS = dict(
    ckpt_path="x.ckpt",
    prompt="",
    seed=1,
    cache=True,
    max_new_tokens=5,
    num_samples=1,
    temperature=0.8,
    top_k=None,
    top_p=None,
    tokenizer="auto",
    device="cpu",
    stream={"window": None, "keep_first": 0},  # conf/sample.yaml's
)


def run_sample(*overrides, cwd):
    return subprocess.run([*SAMPLE, *overrides], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def toy_weights(default_run, tmp_path_factory):
    """The default run's last checkpoint, and the same network exported to safetensors."""
    checkpoint = default_run[1] / "checkpoints" / "last.ckpt"
    return checkpoint, export_checkpoint(checkpoint, tmp_path_factory.mktemp("export") / "toy.safetensors")


@pytest.mark.slow  # reason: andrea-sample processes
def test_sample_from_a_checkpoint_and_from_safetensors(toy_weights, tmp_path):
    outputs = []
    for path in toy_weights:
        done = run_sample(f"ckpt_path={path}", "prompt=3 5 9", "max_new_tokens=6", "temperature=0", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.strip())
        assert "tokens/s, cache=on" in done.stderr
    assert outputs == ["3 5 9 9 9 9 9 9 9"] * 2  # the repetition task, learned; the same network twice
    assert list(tmp_path.iterdir()) == []  # sampling writes nothing


@pytest.mark.slow  # reason: an andrea-sample process
def test_a_one_token_prompt_of_ids(toy_weights, tmp_path):
    done = run_sample(f"ckpt_path={toy_weights[0]}", "prompt=3", "max_new_tokens=3", "temperature=0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # Hydra hands prompt=3 over as an int
    assert done.stdout.strip() == "3 3 3 3"


@pytest.mark.slow  # reason: an andrea-sample process
def test_a_typo_d_setting_names_the_closest(toy_weights, tmp_path):
    done = run_sample(f"ckpt_path={toy_weights[0]}", "+temprature=0", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "andrea-sample: error: temprature is not a setting of the config (did you mean temperature?); "
        "drop the override, or check its spelling"
    ]


@pytest.mark.slow  # reason: andrea-sample processes
def test_a_bad_setting_is_one_line_before_loading(toy_weights, tmp_path):
    done = run_sample(f"ckpt_path={toy_weights[0]}", "prompt=3 99", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "andrea-sample: error: prompt holds token id 99, outside the model's vocabulary 0..63"
    done = run_sample(f"ckpt_path={tmp_path / 'missing.ckpt'}", cwd=tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("max_new_tokens", 0, "max_new_tokens=0 must be an integer in \\[1, 10000000\\]"),
        ("max_new_tokens", 10**9, "max_new_tokens=1000000000 must be an integer in \\[1, 10000000\\]"),
        ("num_samples", -1, "num_samples=-1 must be an integer in \\[1, 1024\\]"),
        ("temperature", -0.5, "temperature=-0.5 must be 0 \\(greedy\\) or a finite number >= 0.001"),
        ("temperature", 1e-320, "temperature=1e-320 must be 0 \\(greedy\\) or a finite number >= 0.001"),
        ("temperature", float("nan"), "temperature=nan must be 0 \\(greedy\\) or a finite number >= 0.001"),
        ("max_new_tokens", True, "max_new_tokens=True must be an integer in \\[1, 10000000\\]"),
        ("num_samples", 10**6, "num_samples=1000000 must be an integer in \\[1, 1024\\]"),
        ("seed", -3, "seed=-3 must be an integer in \\[0, 9223372036854775807\\]"),
        ("cache", "maybe", "cache='maybe' must be true or false"),
        ("device", "gpu", "device='gpu' must be cpu, cuda or cuda:<n>"),
        ("top_k", 0, "top_k=0 must be a positive integer, or null"),
        ("top_p", 1.5, "top_p=1.5 must be a finite number > 0 and <= 1, or null"),
        ("tokenizer", "sentencepiece", "tokenizer='sentencepiece' is not one of auto, ids, gpt2, bytes"),
    ],
)
def test_settings_are_checked(key, value, message):
    with pytest.raises(SettingError, match=message):
        check_settings(OmegaConf.create({**DEFAULTS, key: value}))


@pytest.mark.parametrize(
    "stream, message",
    [
        ({"window": 0, "keep_first": 4}, "stream.window=0 must be a positive integer, or null"),
        ({"window": 8, "keep_first": -1}, "stream.keep_first=-1 must be an integer"),
        (None, "stream=None must hold stream.window and stream.keep_first"),
        (5, "stream=5 must hold stream.window and stream.keep_first"),
        ({"window": 8}, "stream={'window': 8} must hold stream.window and stream.keep_first"),
        ({"window": None, "keep_first": 4}, "stream.keep_first=4 keeps the first tokens of a streaming cache, and"),
        ({"window": 8, "keep_first": 4, "cache": False}, "cache=false with stream.window=8: streaming is a cache"),
    ],
)
def test_stream_settings_are_checked(stream, message):
    """Each in one line; a mapping's `cache` key stands for the top-level cache= (set beside the stream)."""
    cache = stream.pop("cache", True) if isinstance(stream, dict) else True
    with pytest.raises(SettingError, match=re.escape(message)) as refused:
        check_settings(OmegaConf.create({**DEFAULTS, "stream": stream, "cache": cache}))
    assert "\n" not in str(refused.value)


@pytest.mark.slow  # reason: an andrea-sample process
def test_streaming_a_model_without_rope_is_refused_in_one_line(toy_weights, tmp_path):
    done = run_sample(f"ckpt_path={toy_weights[0]}", "prompt=3", "stream.window=8", "stream.keep_first=4", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "stream.window: embedding has position=learned: positions within the cache need position=rope" in done.stderr


def test_more_tokens_than_memory_holds_is_refused_before_any_work():
    with pytest.raises(SettingError, match="max_new_tokens=10000000 x num_samples=2 is more than 10,000,000 tokens"):
        check_settings(OmegaConf.create({**DEFAULTS, "max_new_tokens": 10_000_000, "num_samples": 2}))


def test_prompts_and_tokenizers():
    ids = pick_tokenizer("auto", None, 64)  # nothing recorded: token ids
    assert encode_prompt(ids, "1 2 3", 64) == [1, 2, 3]
    with pytest.raises(SettingError, match="space-separated token ids"):
        encode_prompt(ids, "hello", 64)
    with pytest.raises(SettingError, match="prompt is empty"):
        encode_prompt(ids, "", 64)
    text = pick_tokenizer("auto", "bytes", 257)  # what the checkpoint recorded
    assert encode_prompt(text, "", 257) == [256] and encode_prompt(text, "hi", 257) == [104, 105]
    with pytest.raises(SettingError, match="tokenizer=bytes has 257 tokens, the model only 64"):
        pick_tokenizer("bytes", None, 64)


def test_safetensors_load_without_pickle(toy_weights, monkeypatch):
    def no_pickle(*args, **kwargs):
        raise AssertionError("torch.load called")

    monkeypatch.setattr(torch, "load", no_pickle)
    net, config, tokenizer = load_any(toy_weights[1])
    assert config["_target_"] == "andrea.models.toy.ToyModel" and tokenizer is None


@pytest.mark.slow  # reason: a pseudo-terminal session of andrea-sample (~7 s); the other tests run it piped
def test_a_terminal_sees_each_token_as_it_comes(toy_weights, tmp_path):
    """stdout a terminal: the prompt at once, then the tokens while generation goes on (many reads);
    the text is the same as piped."""
    import os
    import pty
    import time

    master, slave = pty.openpty()
    args = [f"ckpt_path={toy_weights[0]}", "prompt=3 5", "max_new_tokens=400", "temperature=0"]
    started = time.perf_counter()
    process = subprocess.Popen([*SAMPLE, *args], stdout=slave, stderr=subprocess.PIPE, cwd=tmp_path)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append((time.perf_counter() - started, data.decode()))
    process.wait(timeout=120)
    os.close(master)
    text = "".join(data for _, data in chunks).replace("\r\n", "\n").strip()
    assert process.returncode == 0
    assert text == " ".join(["3", "5"] + ["5"] * 400)  # the repetition task: the last token, again and again
    token_reads = [t for t, data in chunks if data.strip()]
    assert len(token_reads) > 10, "the tokens came in one piece, not as they were sampled"
    piped = run_sample(*args, cwd=tmp_path)
    assert piped.stdout.strip() == text


@pytest.mark.slow  # reason: a short training run, then an andrea-sample process
def test_a_rope_model_streams_past_its_context(tmp_path):
    from hydra.core.hydra_config import HydraConfig

    from andrea.train.pipeline import train
    from tests.compose import compose_train

    overrides = [
        "model=andrea-tiny",
        "position=rope",
        "trainer.max_steps=2",
        "logger=none",
        "callbacks.attention_maps=null",
    ]
    train(compose_train(tmp_path / "run", overrides))
    HydraConfig.instance().cfg = None
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    settings = ["prompt=3 1", "max_new_tokens=100", "temperature=0", "stream.window=8", "stream.keep_first=2"]
    done = run_sample(f"ckpt_path={checkpoint}", "tokenizer=ids", *settings, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 102  # the prompt and 100 new ids: past the model's context of 32
    assert "cache=streaming (first 2 + last 8)" in done.stderr
