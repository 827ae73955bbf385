"""Selections of keys from the data (selection=dsa|moba): DSA equal to transformers' DeepSeek-V3.2 attention with
its lightning indexer on the same weights (forward, backward and cached decoding) and its choice equal to
fla-core's naive_dsa_indexer, packed documents included; MoBA equal to its paper's equations written here one
query at a time; both equal to dense attention once they keep every key, and decoding equal to the full pass."""

from itertools import pairwise
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.masks import Document
from tests.attention.deepseek_v32 import latent_dsa_from
from tests.fla_naive import fla_naive

D, H, T = 64, 4, 16  # d_model, heads (16 wide), tokens
NOPE, ROPE, KV_RANK, Q_RANK = 16, 8, 32, 48  # DeepSeek's qk_nope_head_dim (= v_head_dim), qk_rope_head_dim, ranks
INDEX_HEADS, INDEX_DIM, TOPK = 8, 16, 5
ROPE_TABLES = 1e-6  # RoPE's cos and sin in float32 on both sides, computed in two orders


def dsa_block(topk=TOPK, backend="eager", **settings):
    torch.manual_seed(0)
    selection = {"name": "dsa", "topk": topk, "index_heads": INDEX_HEADS, "index_head_dim": INDEX_DIM} | settings
    latent = {"kv_rank": KV_RANK, "q_rank": Q_RANK, "rope_dim": ROPE, "norm_eps": 1e-6}
    return MultiHeadSelfAttention(D, H, backend=backend, max_context=32, position="rope", latent=latent,
                                  selection=selection).double()  # fmt: skip


def _deepseek_v32(topk):
    from transformers import DeepseekV32Config
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Attention, DeepseekV32RotaryEmbedding

    config = DeepseekV32Config(
        vocab_size=128, hidden_size=D, num_hidden_layers=1, num_attention_heads=H, num_key_value_heads=H,
        kv_lora_rank=KV_RANK, q_lora_rank=Q_RANK, qk_rope_head_dim=ROPE, qk_nope_head_dim=NOPE, v_head_dim=NOPE,
        index_topk=topk, index_head_dim=INDEX_DIM, index_n_heads=INDEX_HEADS, first_k_dense_replace=1,
        n_routed_experts=4, n_group=1, topk_group=1, num_experts_per_tok=2,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(1)
    return config, DeepseekV32Attention(config, layer_idx=0).double(), DeepseekV32RotaryEmbedding(config)


def _ours_from(theirs, ours):
    latent_dsa_from(theirs, ours, NOPE, ROPE, KV_RANK)


def _causal(start, length, total):
    """transformers' eager mask for `length` queries at start.. over `total` keys: 0 or the dtype's minimum."""
    queries = torch.arange(start, start + length).view(-1, 1)
    hidden = torch.arange(total).view(1, -1) > queries
    return torch.zeros(1, 1, length, total, dtype=torch.float64).masked_fill(hidden, torch.finfo(torch.float64).min)


def test_dsa_equals_transformers_deepseek_v32_attention_with_its_indexer():
    """Forward, the input's and every attention weight's gradient, and a prefill of 9 then one token at a time
    through each side's cache: our heads=mla with selection=dsa against DeepseekV32Attention (eager) on the same
    weights, to 1e-6: both build RoPE's tables in float32, in two orders (1/base^x against base^-x). Their indexer
    runs without gradients, ours gives none to attention: the index weights are left out."""
    from transformers import DynamicCache

    config, theirs, rotary = _deepseek_v32(TOPK)
    ours = dsa_block()
    _ours_from(theirs, ours)
    x = torch.randn(2, T, D, dtype=torch.float64)
    positions = torch.arange(T).view(1, -1)
    x_theirs, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = theirs(x_theirs, rotary(x, positions), _causal(0, T, T))[0]
    got = ours(x_ours)[0]
    torch.testing.assert_close(got, expected, rtol=ROPE_TABLES, atol=ROPE_TABLES)
    grad = torch.randn_like(got)
    expected.backward(grad)
    got.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=ROPE_TABLES, atol=ROPE_TABLES)
    torch.testing.assert_close(ours.proj.weight.grad, theirs.o_proj.weight.grad, rtol=ROPE_TABLES, atol=ROPE_TABLES)
    torch.testing.assert_close(
        ours.latent.q_down.weight.grad, theirs.q_a_proj.weight.grad, rtol=ROPE_TABLES, atol=ROPE_TABLES
    )

    cache, mine, steps = DynamicCache(config=config), ours.new_cache(), []
    with torch.no_grad():
        for start, stop in [(0, 9), *((t, t + 1) for t in range(9, T))]:
            piece, at = x[:, start:stop], positions[:, start:stop]
            theirs_step = theirs(piece, rotary(piece, at), _causal(start, stop - start, stop), cache=cache)[0]
            ours_step = ours(piece, cache=mine)[0]
            torch.testing.assert_close(ours_step, theirs_step, rtol=ROPE_TABLES, atol=ROPE_TABLES)
            steps.append(ours_step)
    torch.testing.assert_close(torch.cat(steps, dim=1), got.detach(), rtol=ROPE_TABLES, atol=ROPE_TABLES)


def _index_inputs(block, x):
    """What our indexer scores with: its queries and keys after RoPE (B, T, H_I, d_I), (B, T, d_I), and each index
    head's weight (B, T, H_I), as fla's naive_dsa_indexer takes them (the 1/sqrt(H_I) in the weights)."""
    indexer = block.selection
    B = x.shape[0]
    q = indexer.q_proj(block.latent.query_latent(x)).view(B, T, INDEX_HEADS, INDEX_DIM).transpose(1, 2)
    k = indexer.k_norm(indexer.k_proj(x)).unsqueeze(1)
    q, k = indexer.rotary(q, 0), indexer.rotary(k, 0)
    return q.transpose(1, 2), k[:, 0], indexer.weights_proj(x) / INDEX_HEADS**0.5


def test_the_indexer_chooses_the_keys_fla_s_naive_indexer_chooses_in_packed_documents_too():
    """fla's naive_dsa_indexer (ReLU scores, top-k over the causal keys, -1 where fewer) on our indexer's own
    queries, keys and weights: the same set of keys for every query; with three packed documents, fla's varlen
    call (cu_seqlens, indices within each document) chooses what our Document mask leaves."""
    naive = fla_naive("dsa")
    block = dsa_block()
    x = torch.randn(1, T, D, dtype=torch.float64)
    ids = torch.tensor([[0] * 5 + [1] * 7 + [2] * 4])
    with torch.no_grad():
        q, k, w = _index_inputs(block, x)
        for mask, cu_seqlens in [(None, None), (Document(ids), torch.tensor([0, 5, 12, T]))]:
            chosen = _chosen_keys(block, x, mask)
            indices = naive.naive_dsa_indexer(q, k, w, topk=TOPK, activation="relu", cu_seqlens=cu_seqlens)[0]
            starts = torch.zeros(T, dtype=torch.long) if cu_seqlens is None else cu_seqlens[ids[0]]
            for t in range(T):
                theirs = {int(s) + int(starts[t]) for s in indices[t] if s >= 0}
                assert set(torch.nonzero(chosen[t]).flatten().tolist()) == theirs, (mask, t)


def _chosen_keys(block, x, mask=None):
    """The keys the block's selection chose, (T, S) for the first sequence, read at its hook point."""
    seen = []
    remove = block.points["hook_selected"].add(lambda chosen, point: seen.append(chosen))
    try:
        block(x, mask=mask)
    finally:
        remove()
    return (seen[0][0, 0] & block.allowed(T)[0]) if mask is None else seen[0][0, 0] & _allowed(mask)


def _allowed(mask):
    return (torch.ones(T, T, dtype=torch.bool).tril() & mask.dense(T, T)[0, 0]).bool()


def moba_block(block_size=4, topk_blocks=3, n_kv_head=None, **settings):
    torch.manual_seed(0)
    selection = {"name": "moba", "block_size": block_size, "topk_blocks": topk_blocks}
    return MultiHeadSelfAttention(D, H, n_kv_head, backend="eager", max_context=32, position="rope",
                                  selection=selection, **settings).double()  # fmt: skip


def _moba_by_hand(q, k, v, block_size, topk_blocks):
    """MoBA (Lu et al. 2025, §2.2) one query and head at a time, from the paper's equations: the gate of block i
    is q · mean(K[I_i]); a query takes its own block and the top-k blocks among those wholly before it (k counts
    the own block), and attends, causally, to the union of their keys."""
    B, heads, length, d = q.shape
    k, v = k.repeat_interleave(heads // k.shape[1], 1), v.repeat_interleave(heads // v.shape[1], 1)
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(heads):
            for t in range(length):
                own = t // block_size
                gates = {
                    i: float(q[b, h, t] @ k[b, h, i * block_size : (i + 1) * block_size].mean(0)) for i in range(own)
                }
                picked = sorted(gates, key=lambda i: gates[i], reverse=True)[: topk_blocks - 1] + [own]
                keys = [s for s in range(t + 1) if s // block_size in picked]
                weights = torch.softmax(q[b, h, t] @ k[b, h, keys].T / d**0.5, dim=-1)
                out[b, h, t] = weights @ v[b, h, keys]
    return out


@pytest.mark.parametrize(
    ("block_size", "topk_blocks", "n_kv_head", "documents"),
    [(4, 2, None, [T + 1]), (3, 3, 2, [T + 1]), (5, 4, None, [T + 1]), (3, 2, None, [7, 4, T - 10])],
)
def test_moba_is_its_paper_s_equations(block_size, topk_blocks, n_kv_head, documents):
    """Our layer's heads (hook_z) against MoBA's equations on its own queries, keys and values (hook_rot_q, _k,
    hook_v), a short last block and grouped heads included; with three packed documents, the equations on each
    document alone (MoBA's varlen form: the blocks restart at every document)."""
    block = moba_block(block_size, topk_blocks, n_kv_head)
    seen: dict[str, torch.Tensor] = {}
    for name in ("hook_rot_q", "hook_rot_k", "hook_v", "hook_z"):
        block.points[name].add(lambda value, point: seen.__setitem__(point.name, value))
    ids = torch.repeat_interleave(torch.arange(len(documents)), torch.tensor(documents)).expand(2, -1)
    block(torch.randn(2, T + 1, D, dtype=torch.float64), mask=Document(ids) if len(documents) > 1 else None)
    q, k, v = (seen[name].transpose(1, 2) for name in ("hook_rot_q", "hook_rot_k", "hook_v"))
    edges = [0, *torch.tensor(documents).cumsum(0).tolist()]
    expected = torch.cat([_moba_by_hand(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], block_size, topk_blocks)
                          for a, b in pairwise(edges)], dim=2)  # fmt: skip
    torch.testing.assert_close(seen["hook_z"].transpose(1, 2), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("selection", ["dsa", "moba"])
def test_a_selection_that_keeps_every_key_is_dense_attention(selection):
    """DSA with topk = T, MoBA with as many blocks as the sequence has (`keep_every_key`): the layer without a
    selection, forward and backward, on the same weights."""
    sparse = dsa_block() if selection == "dsa" else moba_block()
    sparse.selection.keep_every_key(T)
    dense = dsa_block() if selection == "dsa" else moba_block()
    dense.selection = None
    dense.load_state_dict(sparse.state_dict(), strict=False)
    x = torch.randn(2, T, D, dtype=torch.float64, requires_grad=True)
    got, expected = sparse(x)[0], dense(x)[0]
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(got)
    (x_got,) = torch.autograd.grad(got, x, grad)
    (x_expected,) = torch.autograd.grad(expected, x, grad)
    torch.testing.assert_close(x_got, x_expected, rtol=1e-12, atol=1e-12)


def test_a_selection_chooses_fewer_keys_than_the_mask_allows():
    """With topk 5 of 16 keys, no head of the last query weighs more than 5 keys, and every head some; MoBA with 3
    blocks of 4 at most 12; each row still sums to 1."""
    x = torch.randn(1, T, D, dtype=torch.float64)
    for block, most in ((dsa_block(), TOPK), (moba_block(4, 3), 12)):
        weights = block(x, return_weights=True)[1]
        seen = (weights[0, :, -1] > 0).sum(-1)
        assert (seen <= most).all() and (seen > 0).all()
        assert F.relu(weights).sum(-1).sub(1).abs().max() < 1e-12  # each row still a distribution


def test_a_layer_pattern_mixes_a_selection_with_dense_layers_and_a_file_carries_it(tmp_path):
    """model.net.kinds gives one kind DSA and leaves the other dense; the model's file names the selection and its
    settings as plain values, and the model read back computes the same logits."""
    from andrea.models.files.export import load, save
    from andrea.models.gpt import GPT

    torch.manual_seed(0)
    dsa = {"name": "dsa", "topk": 4, "index_heads": 2, "index_head_dim": 8}
    config: dict[str, Any] = {
        "_target_": "andrea.models.gpt.GPT", "vocab_size": 32, "max_context": 24, "n_layer": 2, "d_model": 32,
        "position": "rope", "attention": {"n_head": 4, "backend": "eager"}, "layout": ["sparse", "dense"],
        "kinds": {"sparse": {"mixer": "attention", "selection": dsa}, "dense": {"mixer": "attention"}},
    }  # fmt: skip
    net = GPT(**{key: value for key, value in config.items() if key != "_target_"}).eval()
    assert [getattr(getattr(mixer, "selection", None), "name", None) for mixer in net.mixers] == ["dsa", None]
    tokens = torch.randint(0, 32, (2, 20))
    path = save(net, config, tmp_path / "model.safetensors")
    loaded, loaded_config = load(path)
    assert loaded_config["kinds"]["sparse"]["selection"] == dsa
    torch.testing.assert_close(loaded.eval()(tokens), net(tokens))


@pytest.mark.parametrize(
    "selection",
    [["selection=dsa", "selection.topk=4"], ["selection=moba", "selection.block_size=4"], ["selection=nsa"]],
)
def test_a_selection_trains_draws_its_maps_and_samples_with_its_cache_as_without(tmp_path, selection):
    """From the command line's config: 3 steps, the attention maps drawn from the weights the heads used, a KV cache
    that counts DSA's index keys, and 12 greedy tokens the same whether the cache serves them or not."""
    from andrea.models.network import network
    from tests.mixers.command_line import trains_and_samples

    module = trains_and_samples(tmp_path, "attention", *selection, "position=rope", maps=True)
    assert list((tmp_path / "attention_maps").glob("*.png"))
    mixer = network(module).mixers[0]
    assert isinstance(mixer, MultiHeadSelfAttention)
    width = 2 * mixer.heads.n_kv_head * mixer.head_dim + (32 if selection[0] == "selection=dsa" else 0)
    assert mixer.cache_width() == width


def _kl_by_hand(weights, scores, keys):
    """Σ_s p log(p / q) over each query's attended keys, the mean over queries: p the weights summed over the heads
    and normalised, q the softmax of the index scores over the same keys."""
    total, rows = 0.0, 0
    for b in range(weights.shape[0]):
        for t in range(weights.shape[2]):
            attended = torch.nonzero(keys[b, t]).flatten()
            p = weights[b, :, t, attended].sum(0)
            p = p / p.sum()
            q = torch.softmax(scores[b, t, attended], dim=0)
            total, rows = total + float((p * (p / q).log()).sum()), rows + 1
    return total / rows


@pytest.mark.parametrize("train_indexer", ["sparse", "dense"])
def test_the_indexer_s_own_loss_is_the_kl_from_the_heads_summed_attention(train_indexer):
    """DeepSeek-V3.2's indexer loss, by hand: over the chosen keys (sparse) or every key the mask allows (dense,
    where attention reads every key too)."""
    block = dsa_block(train_indexer=train_indexer)
    seen: dict[str, torch.Tensor] = {}
    for name in ("hook_selection_scores", "hook_selected"):
        block.points[name].add(lambda value, point: seen.__setitem__(point.name, value.detach()))
    x = torch.randn(2, T, D, dtype=torch.float64)
    weights = block(x, return_weights=True)[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    keys = causal.expand(2, T, T) if train_indexer == "dense" else seen["hook_selected"][:, 0] & causal
    assert ((weights > 0).any(1) == keys).all()  # attention read exactly those keys
    expected = _kl_by_hand(weights.double(), seen["hook_selection_scores"].double(), keys)
    assert block.selection.own_loss is not None
    assert abs(float(block.selection.own_loss) - expected) < 1e-5  # the loss in float32, as the scores


def test_the_indexer_learns_from_its_own_loss_alone_and_attention_from_the_task_s():
    """The sparse stage: the indexer's input is detached and its choice has no gradient, so the task's loss moves
    no index weight and the indexer's loss moves nothing else."""
    block = dsa_block()
    x = torch.randn(2, T, D, dtype=torch.float64, requires_grad=True)
    out = block(x)[0]
    own = block.selection.own_loss
    indexer = [p for name, p in block.named_parameters() if name.startswith("selection.")]
    rest = [p for name, p in block.named_parameters() if not name.startswith("selection.")]
    task_grads = torch.autograd.grad(out.square().sum(), [*indexer, *rest, x], allow_unused=True, retain_graph=True)
    own_grads = torch.autograd.grad(own, [*indexer, *rest, x], allow_unused=True)
    assert all(g is None for g in task_grads[: len(indexer)]) and all(g is not None for g in task_grads[len(indexer) :])
    assert all(g is not None for g in own_grads[: len(indexer)]) and all(g is None for g in own_grads[len(indexer) :])


def test_the_dense_warm_up_trains_the_indexers_alone_and_their_kl_falls():
    """train_indexer=dense in a network: every weight but the indexers' frozen (andrea.core.own_loss); 60 Adam
    steps on the KL alone, on one batch, more than halve it."""
    from andrea.core.own_loss import freeze_the_rest, own_losses
    from andrea.models.gpt import GPT

    torch.manual_seed(0)
    selection = {"name": "dsa", "topk": 4, "index_heads": 4, "index_head_dim": 16, "train_indexer": "dense"}
    net = GPT(vocab_size=32, max_context=24, n_layer=2, d_model=32, position="rope",
              attention={"n_head": 4, "backend": "eager", "selection": selection})  # fmt: skip
    frozen = freeze_the_rest(net)
    trained = [name for name, p in net.named_parameters() if p.requires_grad]
    assert trained and all(".selection." in name for name in trained) and set(trained).isdisjoint(frozen)
    optimizer = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-2)
    tokens = torch.randint(0, 32, (4, 24))
    losses = []
    for _ in range(60):
        net(tokens)
        loss = torch.stack(own_losses(net.modules())).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0] / 2, losses[::10]


def test_an_indexer_that_learns_nothing_keeps_no_loss_and_waits_for_no_gradient():
    """train_indexer=none: no own loss, and its weights frozen (a weight that never gets a gradient stops DDP)."""
    block = dsa_block(train_indexer="none")
    block(torch.randn(2, T, D, dtype=torch.float64))
    assert block.selection.own_loss is None
    assert not any(p.requires_grad for p in block.selection.parameters())
    assert all(p.requires_grad for name, p in block.named_parameters() if not name.startswith("selection."))


@pytest.mark.slow(reason="collects the kit in a second pytest, twice (~14 s)")
@pytest.mark.parametrize(
    ("option", "cells"), [(("--andrea-selections", "moba"), 33), (("--andrea-masks", "causal"), 0)]
)
def test_the_kit_runs_a_chosen_selection_s_cells_alone(tmp_path, option, cells):
    """`pytest --pyargs andrea.testing --andrea-selections moba` collects MoBA's 33 cells and no attention or mixer
    cell (the kit's tests of no cell stay, as with --andrea-mixers); an option that narrows the kit to attention
    leaves every selection's out."""
    from tests.attention.test_conformance_kit import run_kit

    done = run_kit(tmp_path, "--collect-only", "-m", "", *option)
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    chosen = [line for line in collected if "test_selection_" in line]
    assert done.returncode == 0 and len(chosen) == cells, done.stdout[-2000:]
    assert all("moba" in line for line in chosen)
    others = [line for line in collected if "test_parity[" in line or "test_mixer_parity" in line]
    assert option[0] != "--andrea-selections" or not others  # no attention or mixer cell beside them


def test_dsa_s_top_k_takes_the_earlier_of_tied_keys_as_a_stable_sort_does():
    """Scores with many ties (small integers) and keys that may not be chosen (-inf): the keys top_keys keeps are
    the first k of a stable descending sort, every finite one where fewer than k are."""
    from andrea.attention.selection.dsa import top_keys

    scores = torch.randint(0, 4, (3, 7, 20)).float()
    scores[torch.rand(3, 7, 20) < 0.3] = float("-inf")
    for k in (1, 5, 13, 20, 25):
        ranked = scores.sort(dim=-1, descending=True, stable=True)
        keep = min(k, 20)
        expected = torch.zeros_like(scores, dtype=torch.bool).scatter(
            -1, ranked.indices[..., :keep], ranked.values[..., :keep] > float("-inf")
        )
        assert torch.equal(top_keys(scores, k), expected), k
