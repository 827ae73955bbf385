"""GPT-2's weights as an ANDREA GPT (andrea.models.files.gpt2), against Hugging Face's GPT2LMHeadModel built
here with random weights and saved with save_pretrained(safe_serialization=True): no network."""

import json
import subprocess
import sys
from typing import cast

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from andrea.attention import backend_registry
from andrea.models.files.gpt2 import GPT2FileError, load_gpt2
from andrea.models.files.load import load_any
from andrea.models.generate import generate
from andrea.models.gpt import GPT

BACKENDS = backend_registry.names()  # every registered backend, plugins too
SMALL = dict(vocab_size=101, n_positions=64, n_embd=48, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def save_hf(folder, **config):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**config)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2-small-config")
    return save_hf(folder, **SMALL), folder


def test_the_parameter_count_with_bias_is_gpt2_small_s():
    with torch.device("meta"):  # shapes only: counted without allocating 124M parameters
        model, default = GPT(bias=True, activation="gelu_tanh"), GPT()
    assert model.num_parameters() == 124_439_808  # GPT-2 small, as Hugging Face counts it
    assert default.num_parameters() == 124_337_664  # the bias-free default is unchanged


@pytest.mark.parametrize("backend", BACKENDS)
def test_logits_equal_hugging_face_s_for_every_backend(small, backend):
    hf, folder = small
    net, config = load_gpt2(folder, attention={"backend": backend})
    assert config["bias"] is True and config["activation"] == "gelu_tanh"
    idx = torch.randint(SMALL["vocab_size"], (2, 24))
    with torch.no_grad():
        torch.testing.assert_close(net(idx)[0], hf(idx).logits, atol=1e-4, rtol=1e-4)


def test_greedy_generation_with_the_cache_gives_hugging_face_s_tokens(small):
    hf, folder = small
    net, _ = load_gpt2(folder)
    prompt = torch.randint(SMALL["vocab_size"], (1, 5))
    ours = generate(net, prompt, 20, temperature=0)
    theirs = hf.generate(prompt, max_new_tokens=20, do_sample=False, pad_token_id=0)
    assert ours.tolist() == theirs.tolist()


def test_every_reader_takes_the_folder(small):
    _, folder = small
    net, config, tokenizer = load_any(folder)
    assert tokenizer == "gpt2" and isinstance(net, GPT) and config["attention"]["mask"] == "causal"
    assert load_any(folder / "model.safetensors")[2] == "gpt2"  # the file, its config.json beside it


def test_pickled_weights_and_bad_folders_are_refused_in_one_line(small, tmp_path):
    _, folder = small
    (tmp_path / "pickled").mkdir()
    (tmp_path / "pickled" / "pytorch_model.bin").write_bytes(b"\x80\x04not read")
    with pytest.raises(GPT2FileError, match="pytorch_model.bin, a pickle, which andrea does not load.*save_pretrained"):
        load_gpt2(tmp_path / "pickled")
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(GPT2FileError, match="config.json not found"):
        load_gpt2(tmp_path / "alone")
    (tmp_path / "alone" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(GPT2FileError, match="model_type='llama', not 'gpt2'"):
        load_gpt2(tmp_path / "alone")
    (tmp_path / "alone" / "config.json").write_text(json.dumps({**SMALL, "model_type": "gpt2", "n_layer": 3}))
    with pytest.raises(GPT2FileError, match="GPT-2's h.2.attn.c_attn.bias is missing"):
        load_gpt2(tmp_path / "alone")
    (tmp_path / "alone" / "config.json").write_text("[" * 100_000 + "]" * 100_000)  # past the parser's depth
    with pytest.raises(GPT2FileError, match="config.json is not JSON; give the config.json of a Hugging Face GPT-2"):
        load_gpt2(tmp_path / "alone")


@pytest.mark.slow  # reason: an andrea-sample process (4 s)
def test_andrea_sample_reads_the_folder(small, tmp_path):
    _, folder = small
    done = subprocess.run(
        [sys.executable, "-m", "andrea.cli.sample", f"ckpt_path={folder}", "tokenizer=ids", "prompt=3 5",
         "max_new_tokens=4", "temperature=0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 6


@pytest.mark.slow  # reason: a 124M-parameter model, built and saved twice (about 500 MB each)
@pytest.mark.triton_interpreter  # every backend: triton's kernels run on CPU under Triton's interpreter
def test_gpt2_small_s_config_equals_hugging_face_for_every_backend(tmp_path):
    hf = save_hf(tmp_path, **GPT2_SMALL)
    idx = torch.randint(GPT2_SMALL["vocab_size"], (1, 32))
    with torch.no_grad():
        want = hf(idx).logits
    for backend in BACKENDS:
        net, _ = load_gpt2(tmp_path, attention={"backend": backend})
        assert cast(GPT, net).num_parameters() == 124_439_808
        with torch.no_grad():
            torch.testing.assert_close(net(idx)[0], want, atol=1e-4, rtol=1e-4, msg=backend)
    ours = generate(net, idx[:, :8], 8, temperature=0)
    assert ours.tolist() == hf.generate(idx[:, :8], max_new_tokens=8, do_sample=False, pad_token_id=50256).tolist()
