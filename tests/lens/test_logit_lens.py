"""The logit lens (andrea.lens.logit_lens) on a random GPT-2 against TransformerLens's: accumulated_resid, then
ln_final and unembed on every layer's residual (tests/lens/test_transformer_lens_parity.py's models); its last
layer is the network's own logits, its first the embeddings read through the head, on every network kind."""

from typing import Any

import pytest
import torch

from andrea.lens.logit_lens import logit_lens, residual_stream
from andrea.models.gpt import GPT
from andrea.models.toy import ToyModel
from tests.lens.test_transformer_lens_parity import SMALL, T, models  # noqa: F401  # models: the shared fixture


def test_the_logit_lens_is_transformer_lens_s_on_gpt2(models):  # noqa: F811
    net, bridge = models
    ids = torch.randint(SMALL["vocab_size"], (2, T), generator=torch.Generator().manual_seed(3))
    _, cache = bridge.run_with_cache(ids)
    with torch.no_grad():
        theirs = bridge.unembed(bridge.ln_final(cache.accumulated_resid()))  # (n_layer + 1, B, T, V)
    ours = logit_lens(net, ids)
    assert ours.shape == (SMALL["n_layer"] + 1, 2, T, SMALL["vocab_size"])
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gpt", "toy", "softcap"])
def test_the_last_layer_s_reading_is_the_network_s_logits_and_the_first_the_embeddings(kind):
    torch.manual_seed(0)
    net: Any
    if kind == "toy":
        net = ToyModel(32, 16, d_model=32, n_layer=2, attention={"n_head": 4}).eval()
    else:
        softcap = 5.0 if kind == "softcap" else None
        net = GPT(vocab_size=32, max_context=16, n_layer=2, d_model=32, attention={"n_head": 4},
                  logit_softcap=softcap).eval()  # fmt: skip
    ids = torch.randint(32, (2, 16))
    lens, stream = logit_lens(net, ids), residual_stream(net, ids)
    with torch.no_grad():
        torch.testing.assert_close(lens[-1], net(ids)[0], rtol=0, atol=0)
        torch.testing.assert_close(lens[0], net.unembed(stream[0]), rtol=0, atol=0)
    assert not torch.equal(lens[0], lens[-1])


def test_the_logit_lens_grid_names_each_layer_s_top_token(tmp_path):
    """The picture's cells: the last row's tokens are the network's own predictions, every probability in [0, 1];
    the PNG has a cell per layer and position (looked at: docs/lens.md shows one)."""
    from PIL import Image

    from andrea.lens.logit_lens_figure import draw_logit_lens, top_tokens

    torch.manual_seed(0)
    net = GPT(vocab_size=32, max_context=16, n_layer=2, d_model=32, attention={"n_head": 4}).eval()
    ids = torch.randint(32, (1, 10))
    lens = logit_lens(net, ids)[:, 0]  # (L + 1, T, V)
    top, probabilities = top_tokens(lens)
    assert top.shape == (3, 10) and torch.equal(top[-1], net(ids)[0][0].argmax(-1))
    assert ((probabilities > 0) & (probabilities <= 1)).all()
    path = draw_logit_lens(lens, [f"t{i}" for i in ids[0].tolist()], lambda i: f"t{i}", tmp_path / "lens.png", "t")
    width, height = Image.open(path).size
    assert width > height > 100


def test_a_tuned_lens_reads_each_layer_closer_to_the_last_than_the_logit_lens():
    """Translators trained on 60 batches of a frozen network's inputs: on other inputs every layer's KL to the
    network's prediction falls below the logit lens's (the last layer's is 0 for both), and the network's weights
    and their gradients are as they were."""
    from andrea.lens.tuned_lens import lens_kl, train_tuned_lens

    torch.manual_seed(0)
    net = GPT(vocab_size=32, max_context=16, n_layer=3, d_model=32, attention={"n_head": 4}).eval()
    before = {n: p.clone() for n, p in net.named_parameters()}
    generator = torch.Generator().manual_seed(1)
    lens = train_tuned_lens(net, (torch.randint(32, (8, 16), generator=generator) for _ in range(60)), steps=60)
    held_out = torch.randint(32, (8, 16), generator=generator)
    tuned, logit = lens_kl(net, held_out, lens), lens_kl(net, held_out)
    assert tuned.shape == logit.shape == (4,) and tuned[-1] == logit[-1] == 0
    assert (tuned[:-1] < logit[:-1]).all(), (tuned, logit)
    assert all(torch.equal(p, before[n]) and p.grad is None and p.requires_grad for n, p in net.named_parameters())


def test_a_tuned_lens_trained_on_a_run_beats_the_logit_lens_on_its_validation_rows(induction_run):
    """experiment=induction's network, its translators trained on the run's own training rows: over its validation
    rows every layer's KL to the network's prediction is below the logit lens's."""
    from andrea.lens.tuned_lens import tuned_lens_of_run

    _, run_dir = induction_run
    _, tuned, logit = tuned_lens_of_run(run_dir, steps=100)
    assert tuned[-1] == logit[-1] == 0 and (tuned[:-1] < logit[:-1]).all(), (tuned, logit)
