"""Composition scores between heads of different layers (Elhage et al. 2021, "A Mathematical Framework for
Transformer Circuits"): how much of what an earlier head writes a later head reads, from the weights alone.

Per head, in the row-vector convention x W: W_OV = W_V W_O (D, D), what the head writes given what it reads,
and W_QK = W_Q W_Kᵀ (D, D), how a query position's residual scores a key position's. For a writer head w of
layer l and a reader head r of a later layer:

    Q-composition  ||W_OV^w W_QK^r||_F / (||W_OV^w||_F ||W_QK^r||_F)     the writer feeds the reader's queries
    K-composition  ||W_OV^w (W_QK^r)ᵀ||_F / (...)                          ... its keys (an induction head's)
    V-composition  ||W_OV^w W_OV^r||_F / (...)                             ... its values

The norms ignore the LayerNorms between (TransformerLens folds them into the weights first; here they are
read as the network holds them). Each product of two rank-d matrices is reduced to a d x d one by QR, so no
(D, D) matrix is formed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.models.network import Network

MODES = ("Q", "K", "V")


def head_matrices(net: Network, layer: int) -> dict[str, tuple[Tensor, Tensor]]:
    """Layer `layer`'s W_OV and W_QK per head, each as its two factors ((H, D, d), (H, d, D))."""
    attention = net.attention[layer]
    w_q, w_k, w_v = attention.per_head_weights()  # (H, D, d), (H_kv, D, d) x2
    group = w_q.shape[0] // w_k.shape[0]
    w_k, w_v = w_k.repeat_interleave(group, dim=0), w_v.repeat_interleave(group, dim=0)  # (H, D, d): GQA's sharing
    H, d, D = w_q.shape[0], w_q.shape[2], attention.d_model
    w_o = attention.proj.weight.detach().T.reshape(H, d, D)  # (H, d, D): head h's rows of W_O
    return {"OV": (w_v, w_o), "QK": (w_q, w_k.transpose(-2, -1)), "QK_T": (w_k, w_q.transpose(-2, -1))}


def _cores(left: tuple[Tensor, Tensor], right: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    """A = L1 L2 and B = R1 R2 (batched) -> a (.., d, D) and b (.., D, d) with ||a b|| = ||A B||, ||a|| = ||A||,
    ||b|| = ||B||: the orthonormal factors of L1 = Q R and R2ᵀ = Q' R' drop out of every Frobenius norm."""
    r_left = torch.linalg.qr(left[0].double()).R  # (.., d, d)
    r_right = torch.linalg.qr(right[1].double().transpose(-2, -1)).R  # (.., d, d)
    return r_left @ left[1].double(), right[0].double() @ r_right.transpose(-2, -1)


def composition_scores(net: Network, mode: str) -> Tensor:
    """(L, H, L, H): score[l, w, m, r] of writer head w in layer l and reader head r in layer m, for mode Q, K
    or V; 0 where m <= l (a head reads only what earlier layers wrote)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {', '.join(MODES)}")
    n_layer = len(net.attention)
    matrices = [head_matrices(net, layer) for layer in range(n_layer)]
    read = {"Q": "QK", "K": "QK_T", "V": "OV"}[mode]
    H = matrices[0]["OV"][0].shape[0] if matrices else 0
    scores = torch.zeros(n_layer, H, n_layer, H, dtype=torch.float64)
    for writer in range(n_layer):
        for reader in range(writer + 1, n_layer):
            left = tuple(f.unsqueeze(1) for f in matrices[writer]["OV"])  # (H, 1, ...)
            right = tuple(f.unsqueeze(0) for f in matrices[reader][read])  # (1, H, ...)
            a, b = _cores(left, right)  # type: ignore[arg-type]  # two-tuples of tensors
            scores[writer, :, reader] = torch.linalg.matrix_norm(a @ b) / (
                torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(b)
            )
    return scores.float()
