"""The circuit behind the induction verdict, from the run's own summary and from examples/induction_circuit.py:
the previous-token head they name is the one whose ablation breaks the induction heads, and no other is."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import torch

from andrea.data.from_run import data_from_run
from andrea.lens.interventions import head_means, intervene
from andrea.lens.verdict import score_heads
from andrea.models.files.load import load_any
from andrea.models.network import network

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "induction_circuit.py"


def induction_scores(net, ids, ablated=None, means=None):
    """(L, H) induction scores on ids, with one head mean-ablated."""
    with torch.no_grad(), intervene(net, {} if ablated is None else {ablated: None}, means):
        return score_heads(net(ids, return_weights=True)[1], ids)["induction"].values


def test_the_example_names_the_head_whose_ablation_breaks_the_induction_heads(induction_run, monkeypatch, capsys):
    result, run_dir = induction_run
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), str(run_dir)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    printed = capsys.readouterr().out
    lines = re.findall(
        r"  (L\d+H\d+): induction (\S+), reads (L\d+H\d+) \(ablated: (\S+)\), loss \+(\S+) alone", printed
    )
    assert {head for head, *_ in lines} == {head for head, _ in result.verdict["heads"]}, printed
    sources = {source for _, _, source, _, _ in lines}
    assert len(sources) == 1, printed  # every induction head reads the same previous-token head
    (source,) = sources
    net = network(load_any(run_dir / "checkpoints" / "last.ckpt")[0])
    data = data_from_run(run_dir)
    data.setup("validate")
    ids = next(iter(data.val_dataloader()))["input_ids"]
    means = head_means(net, [ids])
    readers = [tuple(int(n) for n in re.findall(r"\d+", head)) for head, *_ in lines]
    layer, head = (int(n) for n in re.findall(r"\d+", source))
    broken = induction_scores(net, ids, (layer, head), means)
    assert all(broken[r] < 0.5 for r in readers), broken  # without it, no induction head is left
    for other in range(net.attention[0].heads.n_head):
        if other != head:
            kept = induction_scores(net, ids, (layer, other), means)
            assert sum(float(kept[r]) for r in readers) / len(readers) >= 0.5, (other, kept)
    together = re.search(r"all \d+ together: loss (\S+) -> (\S+)", printed)
    assert together and float(together[2]) > 10 * float(together[1])  # together they carry the task


def test_the_run_s_verdict_lists_every_induction_head_and_what_it_reads(induction_run):
    result, _ = induction_run
    verdict = result.verdict
    assert verdict["appeared"] and len(verdict["heads"]) >= 2 and all(h.startswith("L1") for h, _ in verdict["heads"])
    assert set(verdict["reads"]) == {head for head, _ in verdict["heads"]}
    (source,) = {read["reads"] for read in verdict["reads"].values()}
    assert source.startswith("L0") and f"read {source}, previous_token" in verdict["text"]
    assert all(read["ablated"] < read["score"] for read in verdict["reads"].values())
    assert verdict["text"].endswith("(on 8 probe rows)")
