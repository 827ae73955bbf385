"""The attention zoo: one contract, interchangeable backends, mechanisms, masks and head configurations."""

from andrea.attention.block import MultiHeadSelfAttention
from andrea.attention.contract import AttentionBackend, Capabilities, UnsupportedAttentionError
from andrea.attention.heads import HeadConfig, gqa, mha, mqa
from andrea.attention.masks import (
    Causal,
    Document,
    KeyPadding,
    Mask,
    NoMask,
    PrefixLM,
    SlidingWindow,
)
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.softmax import attention_weights, masked_softmax
from andrea.attention.registry import (
    as_mask,
    as_mechanism,
    backend_registry,
    get_backend,
    get_mask,
    get_mechanism,
    mask_registry,
    mechanism_registry,
    parse_mask,
)

__all__ = [
    "AttentionBackend",
    "as_mask",
    "as_mechanism",
    "Capabilities",
    "Causal",
    "Document",
    "HeadConfig",
    "KeyPadding",
    "Mask",
    "Mechanism",
    "MultiHeadSelfAttention",
    "NoMask",
    "PrefixLM",
    "SlidingWindow",
    "UnsupportedAttentionError",
    "attention_weights",
    "backend_registry",
    "get_backend",
    "get_mask",
    "get_mechanism",
    "gqa",
    "masked_softmax",
    "mask_registry",
    "mechanism_registry",
    "mha",
    "mqa",
    "parse_mask",
]
