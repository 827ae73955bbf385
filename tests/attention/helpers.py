"""Inputs shared by the attention tests: tiny shapes, every mask and head config."""

from __future__ import annotations

import torch

from andrea.attention import Causal, Document, KeyPadding, NoMask, PrefixLM, SlidingWindow

BACKENDS = ["naive", "eager", "sdpa", "flex"]
HEADS = {"mha": (4, 4), "gqa": (4, 2), "mqa": (4, 1)}  # name -> (n_head, n_kv_head)
BATCH, SEQ, HEAD_DIM = 2, 9, 8


def make_masks(batch: int = BATCH, seq: int = SEQ) -> dict:
    """One example of every strategy, and compositions with and/or.

    The padding example holds an empty sequence (length 0), so rows whose keys
    are all masked are inside the matrix, not only in a test of their own.
    """
    lengths = torch.tensor([seq - 3, 0] + [seq] * (batch - 2))[:batch]
    documents = torch.tensor([[0] * 3 + [1] * 4 + [2] * (seq - 7), [0] * (seq - 2) + [1] * 2] * batch)[:batch, :seq]
    return {
        "causal": Causal(),
        "none": NoMask(),
        "sliding_window": SlidingWindow(3),
        "prefix_lm": PrefixLM(4),
        "padding": KeyPadding(lengths),
        "document": Document(documents),
        "causal&padding": Causal() & KeyPadding(lengths),
        "causal&document": Causal() & Document(documents),
        "window|document": SlidingWindow(2) | Document(documents),
    }


def make_qkv(heads: str, dtype=torch.float32, batch=BATCH, seq=SEQ, head_dim=HEAD_DIM, requires_grad=False):
    n_head, n_kv_head = HEADS[heads]
    q = torch.randn(batch, n_head, seq, head_dim)
    k = torch.randn(batch, n_kv_head, seq, head_dim)
    v = torch.randn(batch, n_kv_head, seq, head_dim)
    return [t.to(dtype).requires_grad_(requires_grad) for t in (q, k, v)]


TOLERANCE = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}
