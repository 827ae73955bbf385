"""The layer of andrea.mixers.linear_layer one token at a time: what a gated linear mixer's `reference` (its recurrence
as the paper writes it, which the conformance kit proves every form against) is written with. Nothing here calls
the layer's `features`, `log_decay`, `recur` or the forms of andrea.ops.gated_linear; it reads the layer's
parameters (its projections, convolution, gate, norm and W_O) one token at a time (andrea.mixers.token_steps).

    recurrence(layer, x, mask, read)   the gated linear recurrence, the mixer's own part of it read one token at
                                       a time: read(token, q_t, k_t) -> its q_t, k_t and decay α_t
    token_heads(layer, x, mask)        each token with its q, k and v from the projections (and the convolution)
    token_output(layer, o_t, token)    a token's o_t through the norm, the gate and W_O
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.mixers.linear_layer import EPS, LinearMixer
from andrea.mixers.short_conv import ShortConv
from andrea.mixers.token_steps import ConvWindow, Token, tokens

Read = Callable[[Token, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]  # (token, q_t, k_t) -> q_t, k_t, α_t


def recurrence(layer: LinearMixer, x: Tensor, mask: Mask | None, read: Read) -> Tensor:
    """The gated linear recurrence as the papers write it, from a zero state: x (B, T, D) -> y (B, T, D). `read`
    gives a token's q_t and k_t (B, H, K) as its heads read them (a feature map, a rotation by its position) and
    its decay α_t in (0, 1], (B, H, K) per key channel or (B|1, H, 1) per head, from that token alone:

        S_t = diag(α_t) S_{t-1} + k_t v_tᵀ          (S_{t-1} dropped where a document starts)
        o_t = S_tᵀ (scale · q_t)                    normalised (layer.normalize): divided by (scale · q_t)·z_t,
        z_t = diag(α_t) z_{t-1} + k_t               the normaliser's own running sum
    """
    B, H, K, V = x.shape[0], layer.n_head, layer.key_dim, layer.value_dim
    S, z, out = x.new_zeros(B, H, K, V), x.new_zeros(B, H, K), []
    for token, q_t, k_t, v in token_heads(layer, x, mask):
        q, k, alpha = read(token, q_t, k_t)
        S, z = token.carried(S), token.carried(z)
        S = token.kept(alpha.unsqueeze(-1) * S + k.unsqueeze(-1) * v.unsqueeze(-2), S)
        z = token.kept(alpha * z + k, z)
        o = torch.einsum("bhk,bhkv->bhv", layer.scale * q, S)
        if layer.normalize:
            o = o / (layer.scale * q * z).sum(-1, keepdim=True).clamp_min(EPS)
        out.append(token_output(layer, o, token))
    return torch.stack(out, dim=1)


def token_heads(layer: LinearMixer, x: Tensor, mask: Mask | None) -> Iterator[tuple[Token, Tensor, Tensor, Tensor]]:
    """x one token at a time: each token with its q, k (B, H, K) and v (B, H, V) from the projections, through the
    short convolution's own window where the layer has one, before any feature map."""
    B = x.shape[0]
    convs = {} if layer.convs is None else {s: cast(ShortConv, conv) for s, conv in layer.convs.items()}
    windows = {s: ConvWindow(conv, B) for s, conv in convs.items()}
    for token in tokens(x, mask, layer.name):
        heads = {"q": layer.q_proj(token.x), "k": layer.k_proj(token.x), "v": layer.v_proj(token.x)}
        if windows:
            heads = {s: windows[s](token, u) for s, u in heads.items()}
        q, k, v = (u.view(B, layer.n_head, -1) for u in heads.values())
        yield token, q, k, v


def token_output(layer: LinearMixer, o: Tensor, token: Token) -> Tensor:
    """One token's o (B, H, V) -> the per-head RMSNorm, times the gate swish(W_g x_t) (or the layer's
    `gate_activation`) (each where the layer has it) -> W_O -> y_t (B, D)."""
    o = o if layer.norm is None else layer.norm(o)
    if layer.gate is not None:
        o = o * layer.gate_activation(layer.gate(token.x)).view_as(o)
    return layer.proj(o.flatten(1))
