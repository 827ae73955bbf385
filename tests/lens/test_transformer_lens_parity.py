"""The lens against TransformerLens on the same weights: a random GPT-2 saved with save_pretrained (no network),
read by andrea (andrea.models.files.gpt2) and by TransformerLens's TransformerBridge (raw weights, no folding).
Its LayerNorms' weights and biases are drawn at random too (a fresh GPT-2's are 1 and 0, which hides whether a
point is read before or after them). Every hook point both name holds the same activation (fp32, 1e-5), and
activation patching, direct logit attribution and composition scores agree."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from andrea.lens.attribution import head_outputs, logit_attribution
from andrea.lens.cache import run_with_cache
from andrea.lens.composition import composition_scores
from andrea.lens.patching import patch_heads, patch_residual
from andrea.models.files.gpt2 import load_gpt2

SMALL: dict[str, Any] = dict(
    vocab_size=101, n_positions=64, n_embd=48, n_layer=3, n_head=4, bos_token_id=0, eos_token_id=0
)
T = 12


def transformer_lens():
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        pytest.fail("TransformerLens is not installed: pip install -e '.[lens]' (the README's set-up does)")
    return TransformerBridge


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(**SMALL)).eval()
    with torch.no_grad():
        for name, parameter in hf.named_parameters():
            if ".ln_" in name:  # ln_1, ln_2, ln_f: weights around 1, biases around 0, none the identity
                parameter.copy_(torch.randn_like(parameter) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    hf.save_pretrained(folder, safe_serialization=True)
    bridge = transformer_lens().boot_transformers(str(folder), hf_model=hf, device="cpu")
    net, _ = load_gpt2(folder, attention={"backend": "sdpa"})
    return net.eval(), bridge


@pytest.fixture(scope="module")
def ids():
    return torch.randint(SMALL["vocab_size"], (2, T), generator=torch.Generator().manual_seed(1))


def test_every_shared_hook_name_holds_transformer_lens_s_activation(models, ids):
    net, bridge = models
    logits, ours = run_with_cache(net, ids)
    their_logits, theirs = bridge.run_with_cache(ids)
    shared = [name for name in ours if name in theirs]
    assert set(ours) - set(shared) == set()  # every andrea point of a GPT-2 has its TransformerLens name
    assert len(shared) == 2 + 17 * SMALL["n_layer"] + 2  # embeddings, 17 a block (2 a LayerNorm), the final norm's
    assert {f"blocks.0.{ln}.hook_{point}" for ln in ("ln1", "ln2") for point in ("scale", "normalized")} <= set(shared)
    torch.testing.assert_close(logits, their_logits, atol=1e-5, rtol=1e-5)
    for name in shared:
        mine, reference = ours[name], theirs[name].detach()
        assert mine.shape == reference.shape, name
        if name.endswith("hook_attn_scores"):  # masked keys: -inf here, the dtype's lowest there
            kept = torch.ones(T, T, dtype=torch.bool).tril()
            assert (mine[..., ~kept] == float("-inf")).all() and (reference[..., ~kept] < -1e30).all()
            mine, reference = mine[..., kept], reference[..., kept]
        torch.testing.assert_close(mine, reference, atol=1e-5, rtol=1e-5, msg=name)


def logit_diff(logits):
    """The metric of the patching tests: the last position's logit of token 3 minus token 5, batch mean."""
    return (logits[:, -1, 3] - logits[:, -1, 5]).mean()


def test_head_and_residual_patching_agree_with_transformer_lens(models, ids):
    from transformer_lens import patching

    net, bridge = models
    corrupted = ids.clone()
    corrupted[:, 2] = (ids[:, 2] + 7) % SMALL["vocab_size"]  # one token changed
    _, clean_cache = bridge.run_with_cache(ids)
    heads = patch_heads(net, ids, corrupted, logit_diff)  # (L, H)
    expected = patching.get_act_patch_attn_head_out_all_pos(bridge, corrupted, clean_cache, logit_diff)
    torch.testing.assert_close(heads, expected.detach(), atol=1e-5, rtol=1e-5)
    resid = patch_residual(net, ids, corrupted, logit_diff)  # (L, T)
    expected = patching.get_act_patch_resid_pre(bridge, corrupted, clean_cache, logit_diff)
    torch.testing.assert_close(resid, expected.detach(), atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        unpatched = float(logit_diff(net(corrupted)[0]))
    others = [t for t in range(T) if t != 2]  # entering layer 0 the runs differ at token 2 alone
    assert resid[0, others] == pytest.approx([unpatched] * (T - 1), abs=1e-6) and resid[0, 2] != unpatched


def test_direct_logit_attribution_adds_up_and_heads_are_transformer_lens_s(models, ids):
    net, bridge = models
    _, theirs = bridge.run_with_cache(ids)
    results = theirs.stack_head_results(layer=-1, pos_slice=-1)  # (L·H, B, D): every head's write at the end
    mine = head_outputs(net, ids)[:, :, :, -1]  # (L, H, B, D)
    torch.testing.assert_close(mine.flatten(0, 1), results.detach(), atol=1e-5, rtol=1e-5)
    attribution = logit_attribution(net, ids, target=(3, 5))  # the logit difference at the last position
    logits, _ = net(ids)
    torch.testing.assert_close(attribution.total, logits[:, -1, 3] - logits[:, -1, 5], atol=1e-4, rtol=1e-4)
    assert attribution.heads.shape == (SMALL["n_layer"], SMALL["n_head"], 2)
    scale = theirs["ln_final.hook_scale"][:, -1].detach()  # (B, 1): the final LayerNorm's, frozen
    ln_w, w_u = net.ln_f.weight.detach(), net.lm_head.weight.detach()
    direction = (w_u[3] - w_u[5]) * ln_w  # (D,)
    centred = results.detach() - results.detach().mean(dim=-1, keepdim=True)
    by_hand = (centred / scale) @ direction  # (L·H, B)
    torch.testing.assert_close(attribution.heads.flatten(0, 1), by_hand, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["Q", "K", "V"])
def test_composition_scores_are_transformer_lens_s(models, mode):
    net, bridge = models
    scores = composition_scores(net, mode)  # (L, H, L, H): writer's head, reader's head; 0 unless reader is later
    expected = bridge.all_composition_scores(mode).scores.detach()
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)
    assert (scores[1:, :, 0] == 0).all() and (scores[0, :, 1:] > 0).all()
