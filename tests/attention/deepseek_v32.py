"""transformers' DeepseekV32Attention's weights (with its indexer) in our layout, for the tests that hold our
heads=mla with selection=dsa equal to it: one layer (tests/attention/test_selection.py) and the preset's whole
network (tests/models/test_deepseek_v32.py)."""

from typing import Any

import torch


def latent_dsa_from(theirs: Any, ours: Any, nope: int, rope: int, kv_rank: int) -> None:
    """Their weights into our layer: the same projections, W_UK and W_UV of every head split apart, and the
    decoupled RoPE channels of q and k taken even-then-odd, as their interleaved RoPE turns (x_2i, x_2i+1) and ours
    the halves (the same dot products: q and k permuted alike)."""
    H = ours.heads.n_head
    pairs = torch.cat((torch.arange(0, rope, 2), torch.arange(1, rope, 2)))
    q_rows = torch.arange(H * (nope + rope)).view(H, nope + rope)
    q_rows = torch.cat((q_rows[:, :nope], q_rows[:, nope:][:, pairs]), dim=1).flatten()
    kv_rows = torch.cat((torch.arange(kv_rank), kv_rank + pairs))
    kv_b = theirs.kv_b_proj.weight.view(H, 2 * nope, kv_rank)
    latent, indexer = ours.latent, ours.selection
    with torch.no_grad():
        latent.q_down.weight.copy_(theirs.q_a_proj.weight)
        latent.q_norm.weight.copy_(theirs.q_a_layernorm.weight)
        latent.q_up.weight.copy_(theirs.q_b_proj.weight[q_rows])
        latent.kv_down.weight.copy_(theirs.kv_a_proj_with_mqa.weight[kv_rows])
        latent.kv_norm.weight.copy_(theirs.kv_a_layernorm.weight)
        latent.kv_up.weight.copy_(torch.cat((kv_b[:, :nope].flatten(0, 1), kv_b[:, nope:].flatten(0, 1))))
        ours.proj.weight.copy_(theirs.o_proj.weight)
        for name, source in (("q_proj", "wq_b"), ("k_proj", "wk"), ("weights_proj", "weights_proj")):
            getattr(indexer, name).weight.copy_(getattr(theirs.indexer, source).weight)
        indexer.k_norm.load_state_dict(theirs.indexer.k_norm.state_dict())
