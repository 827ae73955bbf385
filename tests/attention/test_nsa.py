"""NSA (selection=nsa) equal to fla-core's naive NSA ops on our layer's own queries, keys and values: the
compressed branch (naive_nsa_compression over blocks pooled to their mean), the choice of blocks (naive_nsa_topk)
and the selected branch (naive_nsa_selection), mixed with a sliding window written here as fla's flash call
computes it (window_size=(w - 1, 0)) by the gates; packed documents against fla's varlen calls. fla-core pools
with a Triton kernel: the mean pooling is written here too."""

import sys
from itertools import pairwise
from types import ModuleType

import pytest
import torch

from andrea.attention import MultiHeadSelfAttention
from andrea.attention.masks import Document
from andrea.attention.shapes import weighted_values
from tests.fla_naive import fla_naive

D, H, T = 32, 4, 40
BLOCK, TOPK, WINDOW = 4, 5, 6
FLA_FLOAT32 = 1e-5  # fla's naive ops compute in float32; our layer here in float64


def nsa_block(n_kv_head=None, **settings):
    torch.manual_seed(0)
    selection = {"name": "nsa", "block_size": BLOCK, "topk_blocks": TOPK, "window": WINDOW} | settings
    return MultiHeadSelfAttention(D, H, n_kv_head, backend="eager", max_context=T, position="rope",
                                  selection=selection).double()  # fmt: skip


def _fla_naive_nsa(monkeypatch) -> ModuleType:
    """fla-core's fla/ops/nsa/naive.py on its own: fla's package imports its Triton kernels, and the file imports
    two helpers, given here as modules of their own for this test only: mean_pooling (a Triton kernel; the tests
    pool by hand and never call it) and prepare_chunk_offsets (each document's first block's index, in blocks)."""
    utils, pooling = ModuleType("fla.ops.utils"), ModuleType("fla.ops.utils.pooling")
    utils.prepare_chunk_offsets = lambda cu_seqlens, chunk_size: torch.cat(  # type: ignore[attr-defined]
        (cu_seqlens.new_zeros(1), (cu_seqlens.diff() + chunk_size - 1) // chunk_size)
    ).cumsum(-1)
    pooling.mean_pooling = None  # type: ignore[attr-defined]
    for name, module in (("fla.ops.utils", utils), ("fla.ops.utils.pooling", pooling)):
        monkeypatch.setitem(sys.modules, name, module)
    return fla_naive("nsa")


def _pooled(x, edges):
    """(1, T, H, d) -> each document's blocks of BLOCK pooled to their mean, one after another (fla's mean_pooling
    with cu_seqlens: a short last block is the mean of the keys it has)."""
    return torch.cat([x[:, a:b].split(BLOCK, dim=1)[i].mean(1, keepdim=True)
                      for a, b in pairwise(edges) for i in range(-(-(b - a) // BLOCK))], dim=1)  # fmt: skip


def _window_by_hand(q, k, v, edges, scale):
    """(1, T, H, d) -> each query's softmax attention over its document's last WINDOW keys, its own among them."""
    k, v = (x.repeat_interleave(q.shape[2] // x.shape[2], dim=2) for x in (k, v))
    out = torch.zeros_like(q)
    for a, b in pairwise(edges):
        for t in range(a, b):
            keys = slice(max(a, t - WINDOW + 1), t + 1)
            weights = torch.softmax(torch.einsum("hd,shd->hs", q[0, t], k[0, keys]) * scale, dim=-1)
            out[0, t] = torch.einsum("hs,shd->hd", weights, v[0, keys])
    return out


@pytest.mark.parametrize("n_kv_head", [None, 2])
@pytest.mark.parametrize("documents", [[T], [9, 17, T - 26]])
def test_nsa_is_fla_core_s_naive_nsa(monkeypatch, n_kv_head, documents):
    """Our heads' output (hook_z) equals fla's three branches mixed by our gates, g_cmp·o_cmp + g_slc·o_slc +
    g_swa·o_swa, as fla's naive_nsa mixes them; the keys each query attends to in the selected branch
    (hook_selected) are those of fla's chosen blocks; with grouped heads, one choice a group."""
    naive = _fla_naive_nsa(monkeypatch)
    block = nsa_block(n_kv_head)
    seen: dict[str, torch.Tensor] = {}
    for name in ("hook_rot_q", "hook_rot_k", "hook_v", "hook_z", "hook_selected"):
        block.points[name].add(lambda value, point: seen.__setitem__(point.name, value))
    x = torch.randn(1, T, D, dtype=torch.float64)
    ids = torch.repeat_interleave(torch.arange(len(documents)), torch.tensor(documents)).unsqueeze(0)
    block(x, mask=Document(ids) if len(documents) > 1 else None)
    q, k, v = (seen[name] for name in ("hook_rot_q", "hook_rot_k", "hook_v"))  # (1, T, H or H_kv, d)
    edges = [0, *torch.tensor(documents).cumsum(0).tolist()]
    cu_seqlens = torch.tensor(edges) if len(documents) > 1 else None
    scale = block.head_dim**-0.5
    k_cmp, v_cmp = _pooled(k, edges), _pooled(v, edges)
    o_cmp, _ = naive.naive_nsa_compression(q, k_cmp, v_cmp, BLOCK, scale, cu_seqlens)
    indices = naive.naive_nsa_topk(q, k_cmp, TOPK, BLOCK, scale, cu_seqlens)  # (1, T, H_kv, TOPK) within each document
    o_slc = naive.naive_nsa_selection(q, k, v, indices, BLOCK, scale, cu_seqlens)
    o_swa = _window_by_hand(q, k, v, edges, scale)
    gates = torch.sigmoid(block.selection.gate_proj(x)).unflatten(-1, (H, 3)).detach()  # (1, T, H, 3)
    expected = gates[..., 0, None] * o_cmp + gates[..., 1, None] * o_slc + gates[..., 2, None] * o_swa
    torch.testing.assert_close(seen["hook_z"], expected, rtol=FLA_FLOAT32, atol=FLA_FLOAT32)

    chosen, group = seen["hook_selected"][0], H // indices.shape[2]  # (H, T, T)
    document_start = torch.tensor(edges[:-1]).repeat_interleave(torch.tensor(documents)).tolist()
    for t in range(T):
        for h in range(H):
            blocks = {int(i) for i in indices[0, t, h // group] if i >= 0}
            theirs = {s for s in range(document_start[t], t + 1) if (s - document_start[t]) // BLOCK in blocks}
            assert set(torch.nonzero(chosen[h, t]).flatten().tolist()) == theirs, (t, h)


def test_the_weights_nsa_reports_are_the_ones_its_heads_use():
    """The weights the layer returns (the maps' and head verdicts') times the values are its heads' output: the
    three branches' weights mixed by the gates, a compressed block's weight spread over its keys; each row sums to
    the query's gates over the branches that see a key."""
    block = nsa_block()
    seen: dict[str, torch.Tensor] = {}
    for name in ("hook_v", "hook_z"):
        block.points[name].add(lambda value, point: seen.__setitem__(point.name, value))
    x = torch.randn(2, T, D, dtype=torch.float64)
    weights = block(x, return_weights=True)[1]
    out = weighted_values(weights, seen["hook_v"].transpose(1, 2))
    torch.testing.assert_close(out, seen["hook_z"].transpose(1, 2), rtol=1e-12, atol=1e-12)
    gates = torch.sigmoid(block.selection.gate_proj(x)).unflatten(-1, (H, 3)).transpose(1, 2).detach()
    sums = gates[..., 1:].sum(-1) + gates[..., 0] * (torch.arange(T) >= BLOCK - 1)  # a block seen from t = l - 1
    torch.testing.assert_close(weights.sum(-1), sums, rtol=1e-12, atol=1e-12)


def test_nsa_keeps_fewer_keys_than_causal_attention_and_learns_its_gates():
    """At T = 40 the chosen blocks hold at most TOPK·BLOCK keys, fewer than the last query may see; the task's
    gradient reaches the gates (the choice itself is a top-k: no gradient)."""
    block = nsa_block()
    chosen: list[torch.Tensor] = []
    block.points["hook_selected"].add(lambda value, point: chosen.append(value))
    out = block(torch.randn(2, T, D, dtype=torch.float64))[0]
    assert int(chosen[0][:, :, -1].sum(-1).max()) <= TOPK * BLOCK < T
    out.sum().backward()
    assert block.selection.gate_proj.weight.grad is not None and block.selection.gate_proj.weight.grad.abs().sum() > 0


def test_nsa_with_fewer_blocks_than_its_forced_ones_keeps_its_own_block_first():
    """topk_blocks=1: the selected branch reads the query's own block (causal inside), not the document's first."""
    block = nsa_block(topk_blocks=1)
    chosen: list[torch.Tensor] = []
    block.points["hook_selected"].add(lambda value, point: chosen.append(value))
    block(torch.randn(1, T, D, dtype=torch.float64))
    positions = torch.arange(T)
    own = (positions.view(-1, 1) // BLOCK == positions.view(1, -1) // BLOCK) & (
        positions.view(1, -1) <= positions.view(-1, 1)
    )
    assert torch.equal(chosen[0][0], own.expand(H, T, T))
