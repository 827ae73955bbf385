"""Direct logit attribution: how much each head, each MLP and the embeddings write, straight into the final
norm and the unembedding, toward one logit (or a difference of two) at one position.

The residual stream at the end is a sum of what every part wrote: x = embed + Σ_l (Σ_h head_lh + b_O,l +
mlp_l). With the final LayerNorm's scale σ frozen at its value on this input (its mean removal is linear),

    logit = Σ_c ((c - mean(c)) / σ) · (w_LN ⊙ u) + b_LN · u        u = W_U[a] (- W_U[b] for a difference)

so every part c gets its own term, and the terms add up to the logit exactly. A head's write is its output
z_h (B, T, d) times its slice of W_O (d, D): TransformerLens's `stack_head_results`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from andrea.lens.cache import run_with_cache
from andrea.mixers.base import head_writers
from andrea.models.network import Network


@dataclass(frozen=True)
class Attribution:
    """Each part's term, per sequence of the batch (B,); they add up to `total`, the logit (difference)."""

    heads: Tensor  # (L, H, B)
    attn_bias: Tensor  # (L, B): W_O's bias, 0 without one
    mlp: Tensor  # (L, B); (0, B) for a network without MLPs (the toy model)
    embed: Tensor  # (B,): token and position embeddings
    norm_bias: Tensor  # (B,): the final norm's bias
    total: Tensor  # (B,)


def final_norm(net: Network) -> nn.LayerNorm:
    norm = getattr(net, "ln_f", None) or getattr(net, "final_norm", None)
    if not isinstance(norm, nn.LayerNorm):
        raise ValueError(f"{type(net).__name__} has no final LayerNorm (ln_f or final_norm) to attribute through")
    return norm


@torch.no_grad()
def head_outputs(net: Network, ids: Tensor, cache: dict[str, Tensor] | None = None) -> Tensor:
    """ids (B, T) -> every head's write into the residual stream (L, H, B, T, D), W_O's bias aside; from
    `cache` when it holds the heads' outputs already (a run_with_cache of the same ids)."""
    layers = [[(f"blocks.{i}.attn.{point}", w_o) for point, w_o in head_writers(mixer)]
              for i, mixer in enumerate(net.mixers)]  # fmt: skip  # a parallel layer: each part's heads in turn
    names = [name for layer in layers for name, _ in layer]
    if cache is None or not all(name in cache for name in names):
        _, cache = run_with_cache(net, ids, names=names)
    writes = []
    for layer in layers:  # attention or another mixer: W_O reads hook_z
        heads = []
        for name, proj in layer:
            z = cache[name]  # (B, T, H, d)
            w_o = proj.weight.view(proj.out_features, z.shape[2], z.shape[3])  # (D, H, d)
            heads.append(torch.einsum("bthd,ehd->hbte", z, w_o))  # (H, B, T, D)
        writes.append(torch.cat(heads))
    return torch.stack(writes)


def _attention_biases(net: Network, term: Callable[[Tensor], Tensor], final: Tensor) -> Tensor:
    """(L, B): each layer's output-projection bias, as the final norm reads it (0 without one)."""
    biases = final.new_zeros(len(net.mixers), final.shape[0])
    for layer, mixer in enumerate(net.mixers):
        for _, proj in head_writers(mixer):
            if proj.bias is not None:
                biases[layer] += term(proj.bias.expand_as(final))
    return biases


def _mlp_terms(at: dict[str, Tensor], n_layer: int, term: Callable[[Tensor], Tensor], final: Tensor) -> Tensor:
    """(L, B): each layer's MLP output, as the final norm reads it; (0, B) for a network without MLPs."""
    mlp_out = [at[name] for layer in range(n_layer) if (name := f"blocks.{layer}.hook_mlp_out") in at]
    return term(torch.stack(mlp_out)) if mlp_out else final.new_zeros(0, final.shape[0])


@torch.no_grad()
def logit_attribution(net: Network, ids: Tensor, target: int | tuple[int, int], position: int = -1) -> Attribution:
    """Each part's direct effect on the logit of token `target` (or on logit[a] - logit[b] for target=(a, b))
    at `position` of every sequence of ids (B, T)."""
    norm, n_layer = final_norm(net), len(net.mixers)
    w_u = net.lm_head.weight  # type: ignore[attr-defined]  # (V, D): both networks unembed with lm_head
    a, b = (target, None) if isinstance(target, int) else target
    direction = w_u[a] - w_u[b] if b is not None else w_u[a]  # (D,)
    _, cache = run_with_cache(net, ids)
    at = {name: x[:, position] for name, x in cache.items() if x.dim() == 3}  # (B, D) or (B, 4D) per point
    embed = at["hook_embed"] + at.get("hook_pos_embed", 0)  # (B, D)
    final = at[f"blocks.{n_layer - 1}.hook_resid_post"] if n_layer else embed  # what the final norm reads
    centred = final - final.mean(dim=-1, keepdim=True)
    scale = (centred.pow(2).mean(dim=-1, keepdim=True) + norm.eps).sqrt()  # (B, 1): σ, frozen
    reads = direction * norm.weight if norm.weight is not None else direction  # (D,)

    def term(c: Tensor) -> Tensor:  # (..., B, D) -> (..., B)
        return ((c - c.mean(dim=-1, keepdim=True)) / scale) @ reads

    B = final.shape[0]
    heads = term(head_outputs(net, ids, cache)[:, :, :, position])  # (L, H, B)
    attn_bias = _attention_biases(net, term, final)  # (L, B)
    mlp = _mlp_terms(at, n_layer, term, final)  # (L, B)
    norm_bias = (norm.bias @ direction).expand(B) if norm.bias is not None else final.new_zeros(B)
    total = heads.sum(dim=(0, 1)) + attn_bias.sum(dim=0) + mlp.sum(dim=0) + term(embed) + norm_bias
    return Attribution(heads, attn_bias, mlp, term(embed), norm_bias, total)
