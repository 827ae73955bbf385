"""One reader for every model file andrea-sample and andrea-inspect take."""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError, safe_open
from torch import nn

from andrea.models.files import gpt2
from andrea.models.files.checkpoint import load_checkpoint
from andrea.models.files.export import CONFIG_KEY, load_with_tokenizer


def load_any(path: str | Path, device: str = "cpu") -> tuple[nn.Module, dict, str | None]:
    """An andrea-train .ckpt, an andrea .safetensors export, or Hugging Face GPT-2 weights (a folder,
    or a model.safetensors with config.json beside it; andrea.models.files.gpt2) -> network, config, tokenizer."""
    path = Path(path)
    if path.is_dir() or path.suffix == ".bin" or path.suffix == ".safetensors" and not _is_andrea_export(path):
        net, config = gpt2.load_gpt2(path, device)
        return net, config, gpt2.TOKENIZER
    if path.suffix == ".safetensors":
        return load_with_tokenizer(path, device)
    return load_checkpoint(path, device)


def _is_andrea_export(path: Path) -> bool:
    """Whether a safetensors file carries andrea's model config (else: a Hugging Face file)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return CONFIG_KEY in (f.metadata() or {})
    except (SafetensorError, OSError):
        return True  # unreadable: andrea's reader says so in its own words
