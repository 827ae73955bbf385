"""The lens on a GPT-2 folder, as a user with downloaded weights runs it (here a random GPT-2 of a small width with
GPT-2's own vocabulary, saved with save_pretrained): docs/models.md's indirect-object patching, and head importance
on a text file."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from andrea.data.tokenizers import GPT2Tokenizer
from tests.lens.inspect_cli import run_inspect

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_positions=64, n_embd=32, n_layer=2, n_head=2)).save_pretrained(folder)
    return folder


@pytest.mark.slow  # reason: GPT-2's 50,257-token tokenizer and unembedding, patched at every position (10 s)
def test_indirect_object_patching_on_a_gpt2_folder(gpt2_folder, tmp_path, monkeypatch, capsys):
    gpt2 = GPT2Tokenizer()
    assert len(gpt2.encode(CLEAN)) == len(gpt2.encode(CORRUPTED))  # " John" and " Mary" are one token each
    page = tmp_path / "ioi.html"
    args = [str(gpt2_folder), CLEAN, f"patch={CORRUPTED}", "answer=' Mary'", "wrong=' John'", f"out={page}"]
    code, out, err = run_inspect(args, monkeypatch, capsys)
    assert code == 0, err
    mary, john = gpt2.encode(" Mary")[0], gpt2.encode(" John")[0]
    assert f"patching: logit[{mary}] - logit[{john}] is " in out
    report = json.loads((gpt2_folder.parent / f"{gpt2_folder.name}.patch.json").read_text())
    assert len(report["heads"]) == 2 and len(report["residual"][0]) == len(gpt2.encode(CLEAN))
    # entering layer 0 the two runs differ at one position only: patched there, the clean run comes back whole
    (changed,) = [t for t, (a, b) in enumerate(zip(gpt2.encode(CLEAN), gpt2.encode(CORRUPTED), strict=True)) if a != b]
    assert report["residual"][0][changed] == pytest.approx(1.0, abs=1e-4)
    assert max(abs(x) for t, x in enumerate(report["residual"][0]) if t != changed) < 1e-4
    assert page.is_file() and "backend <b>sdpa</b>" in page.read_text()
    code, _, err = run_inspect([str(gpt2_folder), CLEAN, f"patch={CORRUPTED}", "answer=' Mary Ann'", "wrong=' John'"],
                           monkeypatch, capsys)  # fmt: skip
    assert code == 2 and "answer=' Mary Ann' is 2 tokens" in err


@pytest.mark.slow  # reason: every head and layer ablated on a GPT-2 of GPT-2's vocabulary (8 s)
def test_head_importance_on_a_text_file(gpt2_folder, tmp_path, monkeypatch, capsys):
    text = tmp_path / "text.txt"
    text.write_text(" ".join([CLEAN, "Mary."] * 40))
    args = [str(gpt2_folder), "importance=true", f"importance_data={text}", "importance_batches=1"]
    code, out, err = run_inspect([*args, f"out={tmp_path / 'page.html'}"], monkeypatch, capsys)
    assert code == 0, err
    assert "| layer | every head zero-ablated: loss | rise |" in out and out.count("| L") >= 2 * 2
    code, _, err = run_inspect([str(gpt2_folder), "importance=true", f"importance_data={tmp_path / 'none.txt'}"],
                           monkeypatch, capsys)  # fmt: skip
    assert code == 2 and err.strip().endswith("none.txt is not there; give a text file")
