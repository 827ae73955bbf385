"""Interventions on heads (zero, scale, mean) and the head-importance table: on hand-checked
outputs, on a trained induction model, and from andrea-inspect."""

import json
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from andrea.data.from_run import data_from_run
from andrea.data.tasks import IGNORE_INDEX, SyntheticTaskDataModule
from andrea.lens.cache import hooks, run_with_cache
from andrea.lens.interventions import ablation_loss, head_importance, head_means, intervene, parse_heads
from andrea.models.files.checkpoint import load_checkpoint
from andrea.models.network import network
from andrea.models.toy import ToyModel
from andrea.train.lit.module import LanguageModelModule
from tests.lens.inspect_cli import run_inspect


def toy():
    torch.manual_seed(0)
    return ToyModel(16, 8, d_model=16, n_layer=2, attention={"n_head": 4, "backend": "eager"}).eval()


def z_of(net, layer, idx):
    """Layer `layer`'s head outputs z (B, T, H, d), as W_O reads them (after any intervention)."""
    return run_with_cache(net, idx, names=f"blocks.{layer}.attn.hook_z")[1][f"blocks.{layer}.attn.hook_z"]


def test_zero_scale_and_mean_change_only_the_named_head():
    net, idx = toy(), torch.randint(16, (2, 8))
    z = z_of(net, 1, idx)
    with intervene(net, {(1, 2): 0.0}):
        zero = z_of(net, 1, idx)
    assert (zero[:, :, 2] == 0).all() and torch.equal(zero[:, :, [0, 1, 3]], z[:, :, [0, 1, 3]])
    with intervene(net, {(1, 2): 0.5}):
        torch.testing.assert_close(z_of(net, 1, idx)[:, :, 2], 0.5 * z[:, :, 2])
    means = head_means(net, [idx])
    torch.testing.assert_close(means[1], z.mean(dim=(0, 1)))  # (H, d): over every position
    with intervene(net, {(1, 2): None}, means):
        torch.testing.assert_close(z_of(net, 1, idx)[:, :, 2], means[1][2].expand(2, 8, -1))
    with intervene(net, {(1, 2): 1.0}):
        assert torch.equal(net(idx)[0], toy()(idx)[0])  # scale 1 changes nothing
    assert not any(point.fns for point in net.hook_points().values())  # every hook removed after the block


def test_joint_ablation_shows_what_heads_that_back_each_other_up_carry():
    """Two identical heads: ablating either alone leaves the other's copy; ablating both removes it."""
    net, idx = toy(), torch.randint(16, (2, 8))
    with torch.no_grad():
        w_q, w_k, w_v = net.attention[0].per_head_weights()
        w_q[1], w_k[1], w_v[1] = w_q[0], w_k[0], w_v[0]  # head 1 computes what head 0 does
        net.attention[0].load_per_head_weights(w_q, w_k, w_v)
    batches = [(idx, torch.randint(16, (2, 8)))]

    def loss(logits, labels):
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())

    both = ablation_loss(net, batches, [(0, 0), (0, 1)], loss)
    with intervene(net, {(0, 0): 0.0, (0, 1): 0.0}):
        assert both["ablated_loss"] == pytest.approx(float(loss(net(idx)[0], batches[0][1])))
    alone = ablation_loss(net, batches, [(0, 0)], loss)
    assert both["base_loss"] == alone["base_loss"] and both["rise"] != alone["rise"]
    means = head_means(net, [idx])
    mean_both = ablation_loss(net, batches, [(0, 0), (0, 1)], loss, means)
    with intervene(net, {(0, 0): None, (0, 1): None}, means):
        assert mean_both["ablated_loss"] == pytest.approx(float(loss(net(idx)[0], batches[0][1])))


def test_head_names_are_checked():
    assert parse_heads(["L0H1", "L1H3"], 2, 4) == [(0, 1), (1, 3)]
    with pytest.raises(ValueError, match="ablate: 'H1' is not a head; name heads L<layer>H<head>"):
        parse_heads(["H1"], 2, 4)
    with pytest.raises(ValueError, match=r"ablate: L2H0 is not in this network \(layers 0..1, heads 0..3\)"):
        parse_heads(["L2H0"], 2, 4)


def test_the_model_option_zeroes_heads_in_every_forward():
    net, idx = toy(), torch.randint(16, (2, 8))
    LanguageModelModule(net, optimizer=torch.optim.AdamW, ablate=["L0H1"])
    assert (z_of(net, 0, idx)[:, :, 1] == 0).all()


def test_head_importance_ranks_the_previous_token_head_of_induction_first(induction_run):
    result, run_dir = induction_run
    net, _, _ = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    data = data_from_run(run_dir)
    data.setup("validate")
    batches = [(b["input_ids"], b["labels"]) for b in data.val_dataloader()][:4]

    def loss(logits, labels):
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)

    rows = head_importance(network(net), batches, loss)
    layer0 = {k: v for k, v in result.head_roles.items() if k.startswith("heads/previous_token/L0")}
    previous_token_head = max(layer0, key=lambda name: layer0[name]).rsplit("/", 1)[1]
    # the induction heads of layer 1 read "what came before" from layer 0's previous-token head: one head
    # that all of them need, while they back each other up
    assert rows[0]["head"] == previous_token_head
    assert rows[0]["zero_rise"] > 1.0 and rows[0]["zero_rise"] > 20 * rows[1]["zero_rise"]
    assert rows[0]["mean_rise"] > 1.0


def test_andrea_inspect_writes_the_page_and_the_table(induction_run, monkeypatch, capsys):
    _, run_dir = induction_run
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    code, out, err = run_inspect([str(ckpt), "importance=true", "importance_batches=2"], monkeypatch, capsys)
    assert code == 0, err
    assert out.splitlines()[-1] == f"explorer: {ckpt.with_suffix('.inspect.html')}"
    assert "| head | zero-ablated loss | rise | mean-ablated loss | rise | alone in its layer: loss | rise |" in out
    assert "| layer | every head zero-ablated: loss | rise |" in out
    table = json.loads((run_dir / "checkpoints" / "last.head_importance.json").read_text())
    rows, layers = table["heads"], table["layers"]
    assert len(rows) == 8 and rows[0]["zero_rise"] > 1.0
    # layer 1's induction heads back each other up: none matters alone, any one of them alone nearly suffices,
    # and the layer without all four loses the task
    layer1 = [row for row in rows if row["head"].startswith("L1")]
    assert max(row["zero_rise"] for row in layer1) < 0.1 and layers[1]["rise"] > 1.0
    assert min(row["alone_rise"] for row in layer1) < layers[1]["rise"] / 4
    page = ckpt.with_suffix(".inspect.html").read_text()
    assert page.count('class="head"') == 8 and "Across training" in page and "http" not in page.split("<body>")[1]


def test_andrea_inspect_prints_what_an_ablation_costs(induction_run, monkeypatch, capsys):
    _, run_dir = induction_run
    ckpt = str(run_dir / "checkpoints" / "last.ckpt")
    code, out, err = run_inspect([ckpt, "ablate=[L1H0,L1H1,L1H2,L1H3]", "importance_batches=1"], monkeypatch, capsys)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("ablated"))
    base, ablated = (float(x) for x in line.split("loss ")[1].split(" (")[0].split(" -> "))
    assert line.startswith("ablated (zero) L1H0, L1H1, L1H2, L1H3: loss ") and line.endswith("on 1 validation batches")
    assert ablated > base + 1.0


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "a checkpoint is required: andrea-inspect <run dir>/checkpoints/last.ckpt [input]"),
        (["{ckpt}", "ablate=[L5H0]"], "ablate: L5H0 is not in this network (layers 0..1, heads 0..3)"),
        (["{ckpt}", "ablation=half"], "ablation='half' must be one of zero, mean"),
        (["{ckpt}", "70 71"], "prompt holds token id 70, outside the model's vocabulary 0..63"),
        (["{ckpt}", "+colour=red"], "colour is not a setting of the config"),
        (["{ckpt}", " ".join(["1"] * 40)], "the input is 40 tokens, more than the model's context of 32"),
        (["{ckpt}", "1 2=3"], "prompt='1 2=3' must be space-separated token ids"),  # the input, though it holds =
        (["{ckpt}", "inptu=3"], "Could not override 'inptu'"),  # a typo'd key is still a setting, refused
        (["{ckpt}", "1 2 3", "out=/dev/full"], "out=/dev/full: the page cannot be written (No space left on device)"),
    ],
)
def test_andrea_inspect_refuses_in_one_line(induction_run, monkeypatch, capsys, args, message):
    _, run_dir = induction_run
    ckpt = str(run_dir / "checkpoints" / "last.ckpt")
    code, _, err = run_inspect([a.format(ckpt=ckpt) for a in args], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("andrea-inspect: error: ") and message in err


def test_andrea_inspect_refuses_a_run_dir_whose_result_json_is_no_result(induction_run, monkeypatch, capsys, tmp_path):
    """The page's training frames come from the folder the run's result.json names: a corrupt one is a
    one-line refusal before any page is written, not a traceback after the work."""
    _, run_dir = induction_run
    (tmp_path / "result.json").write_text("{not json")
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    code, _, err = run_inspect([str(ckpt), "1 2 3", f"run_dir={tmp_path}"], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("andrea-inspect: error: ") and "result.json is not JSON" in err


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_explorer_reacts_to_a_hover_in_a_browser(induction_run, monkeypatch, capsys, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _, run_dir = induction_run
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    page = tmp_path / "explorer.html"
    assert run_inspect([str(ckpt), f"out={page}"], monkeypatch, capsys)[0] == 0
    net, _, _ = load_checkpoint(ckpt)
    data = data_from_run(run_dir)
    assert isinstance(data, SyntheticTaskDataModule)  # the induction task's
    ids = data.probe_batch(1)["input_ids"]
    with torch.no_grad():
        _, weights = net(ids, return_weights=True)

    browser.get(page.as_uri())
    heads = browser.find_elements(By.CSS_SELECTOR, ".head")
    assert len(heads) == 8
    assert browser.execute_script("return document.querySelector('.head canvas').toDataURL().length") > 500
    heads[6].click()  # L1H2
    assert browser.find_element(By.ID, "selected").text == "L1H2"
    t = 20  # a query in the second repeat of the block: an induction head looks one past its earlier twin
    ActionChains(browser).move_to_element(browser.find_elements(By.CSS_SELECTOR, "#queries .tok")[t]).perform()
    readout = browser.find_element(By.ID, "readout").text
    row = weights[1][0, 2, t]  # (S,): what L1H2's query t attends to
    top = int(row.argmax())
    assert readout.startswith(f'L1H2: query "{int(ids[0, t])}" ({t}) attends to "{int(ids[0, top])}" ({top})')
    shown = [float(s.get_attribute("data-weight")) for s in browser.find_elements(By.CSS_SELECTOR, "#keys .tok")]
    assert shown == pytest.approx(row.tolist(), abs=0.0025)  # the page carries round(255 · weight)
    browser.save_screenshot(str(tmp_path / "explorer.png"))


@pytest.mark.parametrize("mechanism", ["sigmoid", "sink", "gated", "diff", "softcap", "qknorm"])
def test_ablating_every_head_removes_the_layer_whatever_the_mechanism(mechanism):
    """The hook sees the heads' outputs after the mechanism's own step (the gate, the per-head norm): zeroing
    them all leaves the layer adding its output projection's bias only, as for softmax."""
    torch.manual_seed(0)
    attention = {"n_head": 4, "backend": "eager", "mechanism": mechanism}
    net: Any = ToyModel(16, 8, d_model=16, n_layer=1, attention=attention).eval()  # a Network
    idx = torch.randint(16, (2, 8))
    with intervene(net, {(0, h): 0.0 for h in range(4)}):
        logits = net(idx)[0]
    assert not torch.allclose(logits, net(idx)[0])  # the heads mattered
    with hooks(net, {"blocks.0.attn.hook_z": lambda z, point: torch.zeros_like(z)}):  # what W_O reads, by hand
        assert torch.equal(logits, net(idx)[0])


def test_andrea_inspect_patches_the_input_into_a_corruption(induction_run, monkeypatch, capsys):
    """The corruption changes the token that follows 27 in every earlier repeat (58 -> 40): the induction heads
    copy it, so the clean answer comes back when the residual stream at a changed position comes from the
    clean run."""
    _, run_dir = induction_run
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    block = [49, 27, 58, 62, 35, 48, 7, 9, 8, 63]
    clean = (block * 4)[:32]
    corrupted = [40 if token == 58 else token for token in clean]
    as_text = " ".join(map(str, clean)), f"patch={' '.join(map(str, corrupted))}"
    code, out, err = run_inspect([str(ckpt), *as_text], monkeypatch, capsys)
    assert code == 0, err
    assert "patching: logit[58] - logit[40] is " in out and (run_dir / "checkpoints" / "last.patch.png").is_file()
    report = json.loads((run_dir / "checkpoints" / "last.patch.json").read_text())
    assert report["clean"] > 0 > report["corrupted"]
    layer0 = report["residual"][0]
    assert max(layer0) > 0.9 and clean[layer0.index(max(layer0))] == 58  # where the copied token sits
    assert [layer0[t] for t in range(32) if clean[t] != 58] == pytest.approx([0.0] * 29, abs=1e-3)
    code, _, err = run_inspect([str(ckpt), as_text[0], "patch=49 27"], monkeypatch, capsys)
    assert code == 2 and err.strip().endswith("so give a corruption of the same length")
    code, _, err = run_inspect([str(ckpt), *as_text, "answer=999", "wrong=40"], monkeypatch, capsys)
    assert code == 2 and err.strip().endswith("answer=999, wrong=40: ids outside the vocabulary 0..63")


def test_patching_warns_where_the_gap_it_divides_means_nothing(induction_run, monkeypatch, capsys):
    """Shares of clean - corrupted mean something only while that gap is wide and positive: answers turned
    around (the corrupted run favours the answer) and a gap under the tolerance are said in the printed line,
    the JSON and the picture; a report whose gap is fine carries no warning."""
    from andrea.lens.patch_report import draw_patching, patching_report
    from andrea.models.files.load import load_any
    from andrea.models.network import network

    _, run_dir = induction_run
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    block = [49, 27, 58, 62, 35, 48, 7, 9, 8, 63]
    clean = (block * 4)[:32]
    corrupted = [40 if token == 58 else token for token in clean]
    args = [str(ckpt), " ".join(map(str, clean)), f"patch={' '.join(map(str, corrupted))}", "answer=40", "wrong=58"]
    code, out, err = run_inspect(args, monkeypatch, capsys)
    assert code == 0, err
    assert "patching: warning: the clean-corrupted gap is -" in out and "of the wrong sign" in out
    report = json.loads((run_dir / "checkpoints" / "last.patch.json").read_text())
    assert report["gap"] < 0 and "wrong sign" in report["warning"]

    net, _, _ = load_any(ckpt)
    ids, other = torch.tensor([clean]), torch.tensor([corrupted])
    fine = patching_report(network(net), ids, other, [str(t) for t in clean])
    assert fine["gap"] > 1 and fine["warning"] is None
    tiny = patching_report(network(net), ids, other, [str(t) for t in clean], min_gap=fine["gap"] + 1)
    assert "under" in tiny["warning"] and "ratios of noise" in tiny["warning"]
    with pytest.raises(ValueError, match="nothing to restore"):
        patching_report(network(net), ids, ids, [str(t) for t in clean], answers=(58, 40))
    picture = draw_patching(tiny, run_dir / "tiny.patch.png", "a tiny gap")
    assert picture.stat().st_size > 0


def test_andrea_inspect_writes_into_a_folder_given_as_out(induction_run, monkeypatch, capsys, tmp_path):
    _, run_dir = induction_run
    code, out, err = run_inspect([str(run_dir / "checkpoints" / "last.ckpt"), "1 2 3", f"out={tmp_path}"],
                                 monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    (page,) = tmp_path.glob("last.inspect-*.html")
    assert out.strip().splitlines()[-1] == f"explorer: {page}"
