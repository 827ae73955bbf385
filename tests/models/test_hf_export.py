"""andrea-export --format hf: an ANDREA GPT that GPT-2's architecture holds, as a Hugging Face GPT-2 folder that
andrea's own GPT-2 import, transformers (AutoModelForCausalLM, the text-generation pipeline) and TransformerLens's
bridge load with andrea's logits; anything GPT-2 cannot hold refused in one line naming what does not fit."""

from pathlib import Path

import pytest
import torch
from hydra.core.hydra_config import HydraConfig

from andrea.cli.export import main as export
from andrea.models.files.checkpoint import load_checkpoint
from andrea.models.files.gpt2 import load_gpt2
from andrea.models.files.hf_export import does_not_fit, write_folder
from andrea.models.gpt import GPT
from tests.compose import compose_train

QUICK = [
    "trainer.max_steps=2",
    "trainer.max_epochs=-1",
    "trainer.limit_val_batches=1",
    "logger=none",
    "callbacks.attention_maps=null",
]


@pytest.fixture(scope="module")
def text_gpt(tmp_path_factory):
    """A tiny ANDREA GPT trained two steps on GPT-2's tokens, and its Hugging Face folder."""
    from andrea.train.pipeline import train

    run = tmp_path_factory.mktemp("text_gpt")
    train(compose_train(run, ["model=andrea-tiny", "data=text", "data.tokenizer=gpt2", *QUICK]))
    HydraConfig.instance().cfg = None
    folder = run / "hf"
    export([str(run / "checkpoints" / "last.ckpt"), str(folder), "--format", "hf"])
    net, _, _ = load_checkpoint(run / "checkpoints" / "last.ckpt")
    return net, folder


IDS = torch.tensor([[50256, 15496, 995, 318, 257, 1332, 13, 198, 464, 3139]])


def test_andrea_s_own_gpt2_import_reads_the_folder_back_exactly(tmp_path):
    torch.manual_seed(0)
    net = GPT(vocab_size=50257, max_context=16, n_layer=2, d_model=32, attention={"n_head": 4}, bias=True).eval()
    written = write_folder(net, gpt_config(vocab_size=50257, bias=True), "gpt2", tmp_path)
    assert written == [
        "config.json", "model.safetensors", "generation_config.json", "vocab.json", "merges.txt",
        "tokenizer_config.json", "special_tokens_map.json",
    ]  # fmt: skip
    again, _ = load_gpt2(tmp_path)
    torch.testing.assert_close(again(IDS)[0], net(IDS)[0], rtol=0, atol=1e-5)


@pytest.mark.slow  # reason: trains a tiny GPT on GPT-2's tokens (about 30 s)
def test_andrea_export_writes_the_folder_from_a_checkpoint(text_gpt):
    net, folder = text_gpt
    again, _ = load_gpt2(folder)
    torch.testing.assert_close(again(IDS)[0], net(IDS)[0], rtol=0, atol=1e-5)


@pytest.mark.slow  # reason: imports transformers and TransformerLens (about 8 s)
def test_transformers_and_transformer_lens_load_it_with_andrea_s_logits_and_cache(text_gpt):
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    from andrea.lens.cache import run_with_cache

    net, folder = text_gpt
    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        torch.testing.assert_close(hf(IDS).logits, net(IDS)[0], rtol=0, atol=1e-4)
        assert AutoTokenizer.from_pretrained(folder)("Hello world")["input_ids"] == [15496, 995]
        generated = pipeline("text-generation", model=str(folder))("ROMEO:", max_new_tokens=5, do_sample=False)
        assert generated[0]["generated_text"].startswith("ROMEO:")
        bridge = TransformerBridge.boot_transformers(str(folder), device="cpu", dtype=torch.float32)
        logits, cache = bridge.run_with_cache(IDS)
        _, ours = run_with_cache(net, IDS)
    torch.testing.assert_close(logits, net(IDS)[0], rtol=0, atol=1e-4)
    for name in ("blocks.0.attn.hook_pattern", "blocks.1.hook_resid_pre", "blocks.1.attn.hook_z"):
        torch.testing.assert_close(cache[name], ours[name], rtol=0, atol=1e-4)


def gpt_config(**changes):
    attention = {
        "n_head": 4,
        "n_kv_head": 4,
        "mechanism": {"name": "softmax"},
        "mask": {"name": "causal"},
        "latent": None,
        "selection": None,
    }
    config = {
        "_target_": "andrea.models.gpt.GPT", "vocab_size": 61, "max_context": 16, "n_layer": 2, "d_model": 32,
        "position": "learned", "activation": "gelu", "attention": attention, "mixer": {"name": "attention"},
    }  # fmt: skip
    for key, value in changes.items():
        if key in attention:
            attention[key] = value
        else:
            config[key] = value
    return config


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"position": "rope"}, "position is rope; GPT-2's architecture holds learned only"),
        ({"n_kv_head": 2}, "heads is gqa (n_kv_head=2 of n_head=4)"),
        ({"latent": {"kv_rank": 16}}, "heads is mla"),
        ({"mechanism": {"name": "diff"}}, "mechanism is diff"),
        ({"mask": {"name": "sliding_window", "window": 4}}, "mask is sliding_window"),
        ({"selection": {"name": "moba", "block_size": 4}}, "selection is moba; GPT-2's architecture holds none only"),
        ({"layout": ["attention", "gla"]}, "layers is attention,gla"),
        ({"_target_": "andrea.models.toy.ToyModel"}, "the model is andrea.models.toy.ToyModel"),
        ({"norm": "rmsnorm", "norm_place": "post"}, "norm is rmsnorm post; GPT-2's architecture holds layernorm pre"),
        ({"tie_embeddings": False}, "the LM head is untied"),
        ({"embed_scale": True}, "embed_scale is True"),
        ({"logit_softcap": 30.0}, "logit_softcap is 30.0"),
        ({"d_mlp": 100}, "d_mlp is 100"),
    ],
)
def test_what_gpt2_cannot_hold_is_refused_in_one_line(changes, refusal, tmp_path):
    assert refusal in (does_not_fit(gpt_config(**changes)) or "")
    with pytest.raises(ValueError, match="--format hf: ") as refused:
        write_folder(GPT(61, 16, n_layer=2, d_model=32, attention={"n_head": 4}), gpt_config(**changes), None, tmp_path)
    assert "\n" not in str(refused.value) and not list(tmp_path.iterdir())  # nothing written


def test_a_model_without_biases_is_written_with_zero_biases_that_compute_the_same(tmp_path):
    torch.manual_seed(0)
    net = GPT(vocab_size=61, max_context=16, n_layer=2, d_model=32, attention={"n_head": 4}, activation="relu").eval()
    assert write_folder(net, gpt_config(activation="relu"), None, tmp_path)[:3] == [
        "config.json",
        "model.safetensors",
        "generation_config.json",
    ]  # no tokenizer files: it reads no GPT-2 tokens
    again, _ = load_gpt2(tmp_path)
    ids = torch.randint(0, 61, (2, 16))
    torch.testing.assert_close(again(ids)[0], net(ids)[0], rtol=0, atol=1e-5)


def checkpoint(path, net, config, tokenizer):
    """An andrea-train checkpoint as the export reads one: the network's config, tokenizer and weights."""
    from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, CHECKPOINT_TOKENIZER_KEY
    from andrea.models.files.formats import CHECKPOINT_FORMAT_KEY, FORMAT

    weights = {f"net.{name}": tensor for name, tensor in net.state_dict().items()}
    torch.save({CHECKPOINT_CONFIG_KEY: config, CHECKPOINT_TOKENIZER_KEY: tokenizer, CHECKPOINT_FORMAT_KEY: FORMAT,
                "state_dict": weights}, path)  # fmt: skip
    return str(path)


def test_force_over_an_earlier_export_removes_the_tokenizer_a_model_of_token_ids_lacks(tmp_path, capsys):
    """The folder of a model of GPT-2's tokens, exported again --force for a model of token ids: no tokenizer file
    is left (transformers would load one, and encode text into ids the model does not read); a fast tokenizer's
    files, which the export never writes, go too."""
    folder = tmp_path / "hf"
    gpt2_tokens = GPT(vocab_size=50257, max_context=16, n_layer=1, d_model=32, attention={"n_head": 4}, bias=True)
    export([checkpoint(tmp_path / "gpt2.ckpt", gpt2_tokens, gpt_config(vocab_size=50257, bias=True, n_layer=1),
                       "gpt2"), str(folder), "--format", "hf"])  # fmt: skip
    for name in ("tokenizer.json", "added_tokens.json"):  # as transformers' save_pretrained writes them
        (folder / name).write_text("{}")
    tokenizer = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json",
                 "added_tokens.json"}  # fmt: skip
    assert tokenizer <= {p.name for p in folder.iterdir()}
    token_ids = GPT(vocab_size=61, max_context=16, n_layer=1, d_model=32, attention={"n_head": 4})
    capsys.readouterr()
    export([checkpoint(tmp_path / "ids.ckpt", token_ids, gpt_config(n_layer=1), None), str(folder), "--format", "hf",
            "--force"])  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    assert capsys.readouterr().out.splitlines()[-1] == "no tokenizer files: the model reads token ids, not text"


def test_a_write_that_fails_leaves_the_earlier_export_as_it_was(tmp_path, monkeypatch, capsys):
    import errno
    import os

    from andrea.models.files import hf_export

    net = GPT(vocab_size=61, max_context=16, n_layer=1, d_model=32, attention={"n_head": 4})
    ckpt = checkpoint(tmp_path / "ids.ckpt", net, gpt_config(n_layer=1), None)
    folder = tmp_path / "hf"
    export([ckpt, str(folder), "--format", "hf"])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def fills_up(tensors, path, metadata):
        Path(path).write_bytes(b"half the weights")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(hf_export, "save_file", fills_up)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        export([ckpt, str(folder), "--format", "hf", "--force"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"andrea-export: error: out={folder} cannot be written (No space left on device); give a place with room "
        "for it\n"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing staged is left either


@pytest.mark.parametrize(
    ("out", "problem"),
    [
        ("/dev/null", "is a character device"),
        ("link", "is a link to {tmp}/gone, which does not exist"),
        ("ro/x", "cannot be written (Read-only file system)"),
    ],
)
@pytest.mark.parametrize("hf", [True, False], ids=["hf", "andrea"])
def test_andrea_export_refuses_a_place_it_cannot_write_before_reading_the_checkpoint(
    out, problem, hf, tmp_path, monkeypatch, capsys
):
    """A read-only folder, a device, a link to nothing: one line, exit 2, nothing written. The checkpoint given is
    not there, so a refusal that came after reading it would say that instead."""
    from tests.read_only import read_only

    (tmp_path / "ro").mkdir()
    read_only(monkeypatch, tmp_path / "ro")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    before = sorted(tmp_path.rglob("*"))
    out = out if out.startswith("/") else str(tmp_path / out)
    with pytest.raises(SystemExit) as exit_info:
        export([str(tmp_path / "none.ckpt"), out, *(["--format", "hf"] if hf else [])])
    assert exit_info.value.code == 2
    wanted = "a writable folder" if hf else "a writable .safetensors file"
    assert capsys.readouterr().err == (
        f"andrea-export: error: out={out} {problem.format(tmp=tmp_path)}; give {wanted}\n"
    )
    assert sorted(tmp_path.rglob("*")) == before
