"""DeepSeek-V3.2 as andrea builds it (conf/model/deepseek-v32.yaml: latent heads with DSA in every layer) against
transformers' own model code (DeepseekV32ForCausalLM with dense layers: its eager latent attention and lightning
indexer on CPU), on the same random weights mapped by hand (tests/attention/deepseek_v32.py): the logits, every
gradient of one loss, and the tokens decoded one at a time from each side's cache."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from transformers import DeepseekV32Config, DeepseekV32ForCausalLM

from andrea.models.generate import generate
from tests.attention.deepseek_v32 import latent_dsa_from
from tests.compose import QUICK, compose_train
from tests.models.hf_parity import preset_trained, relative

ROPE_TABLES = 1e-5  # both build RoPE's tables in float32, in two orders; the rest in float64


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The preset's network and transformers' model of the same sizes, its weights ours, in float64."""
    cfg = compose_train(tmp_path_factory.mktemp("deepseek_v32"), [*QUICK, "model=deepseek-v32"])
    net = instantiate(cfg.model.net).double().eval()
    heads, latent, dsa = cfg.heads, cfg.heads.latent, cfg.selection
    config = DeepseekV32Config(
        vocab_size=cfg.model.net.vocab_size, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=heads.n_head, num_key_value_heads=heads.n_head, kv_lora_rank=latent.kv_rank,
        q_lora_rank=latent.q_rank, qk_rope_head_dim=latent.rope_dim, qk_nope_head_dim=16, v_head_dim=16,
        index_topk=dsa.topk, index_head_dim=dsa.index_head_dim, index_n_heads=dsa.index_heads,
        first_k_dense_replace=2, rms_norm_eps=1e-6, max_position_embeddings=cfg.model.net.max_context,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = DeepseekV32ForCausalLM(config).double().eval()
    with torch.no_grad():
        for p in hf.parameters():  # norm gains off their start of 1
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    _load(net, hf, nope=16, rope=latent.rope_dim, kv_rank=latent.kv_rank)
    return net, hf


def _load(net, hf, nope, rope, kv_rank):
    """transformers' weights into our network: embeddings, norms, SwiGLU and the head by name; each layer's latent
    attention and indexer by the layer's map."""
    with torch.no_grad():
        net.embed.token.weight.copy_(hf.model.embed_tokens.weight)
        net.ln_f.weight.copy_(hf.model.norm.weight)
        net.lm_head.weight.copy_(hf.lm_head.weight)
        for ours, theirs in zip(net.blocks, hf.model.layers, strict=True):
            ours.ln_1.weight.copy_(theirs.input_layernorm.weight)
            ours.ln_2.weight.copy_(theirs.post_attention_layernorm.weight)
            for name, source in (("fc", "up_proj"), ("gate", "gate_proj"), ("proj", "down_proj")):
                getattr(ours.mlp, name).weight.copy_(getattr(theirs.mlp, source).weight)
            latent_dsa_from(theirs.self_attn, ours.mixer, nope, rope, kv_rank)


def _ties_at_the_choice(net, ids) -> int:
    """Queries whose 16th and 17th best index scores are equal, over the layers: there two top-k's may choose
    different keys, both right (ours the earlier; torch.topk's is unspecified). With 8 index heads, few keys score
    0 in every head; the inputs below have none: a precondition, asserted."""
    ties: list[int] = []

    def count(scores, point):
        best = scores.sort(dim=-1, descending=True).values
        ties.append(int(((best[..., 15] == best[..., 16]) & (best[..., 16] > float("-inf"))).sum()))

    removers = [block.mixer.points["hook_selection_scores"].add(count) for block in net.blocks]
    with torch.no_grad():
        net(ids)
    for remove in removers:
        remove()
    return sum(ties)


def test_the_preset_is_transformers_deepseek_v32(both):
    """The same logits over 24 tokens (the indexer keeps 16 keys of the last query's 24) and the same gradient of
    one loss at every weight of the embeddings, the head and the last norm."""
    net, hf = both
    ids = torch.randint(0, net.lm_head.weight.shape[0], (2, 24), generator=torch.Generator().manual_seed(1))
    assert _ties_at_the_choice(net, ids) == 0
    ours, theirs = net(ids)[0], hf(ids).logits
    assert relative(ours, theirs) < ROPE_TABLES
    ours.logsumexp(-1).sum().backward()
    theirs.logsumexp(-1).sum().backward()
    for mine, source in (
        (net.embed.token, hf.model.embed_tokens),
        (net.lm_head, hf.lm_head),
        (net.ln_f, hf.model.norm),
    ):
        assert relative(mine.weight.grad, source.weight.grad) < ROPE_TABLES


def test_decoding_from_its_cache_is_transformers_decoding_from_theirs(both):
    """12 greedy tokens after a prompt of 9, each side through its own cache (ours keeps DSA's index keys)."""
    net, hf = both
    prompt = torch.randint(0, net.lm_head.weight.shape[0], (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = hf.generate(prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0)
    ours = generate(net, prompt, 12, top_k=1, use_cache=True)
    assert _ties_at_the_choice(net, ours) == 0
    assert torch.equal(ours, theirs)


@pytest.mark.slow  # reason: a training run (the parts of the preset are those the parity tests above prove)
def test_the_preset_trains_and_generates_with_its_caches(tmp_path):
    result, alike = preset_trained(tmp_path, "deepseek-v32")
    assert result.status == "completed" and result.global_step == 5 and alike
