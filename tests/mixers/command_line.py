"""A mixer trained from the command line's config for 3 steps, then sampled from its checkpoint with and without the
cache: what every new mixer's (and attention setting's) test asks of it end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.compose import QUICK, compose_train


def trains_and_samples(tmp_path: Path, mixer: str, *settings: str, maps: bool = False) -> Any:
    """`mixer=<mixer>` and its `settings` train 3 steps (drawing the attention maps with `maps`), the run's cache
    bytes name the mixer, and 12 greedy tokens from the checkpoint are the same whether the cache serves them or
    every step recomputes. Returns the module read back from the checkpoint."""
    from andrea.models.files.load import load_any
    from andrea.models.generate import generate
    from andrea.train.pipeline import train

    overrides = [*QUICK, f"mixer={mixer}", *settings, "trainer.max_steps=3"]
    result = train(compose_train(tmp_path, overrides + ([] if maps else ["~callbacks.attention_maps"])))
    assert result.status == "completed" and result.global_step == 3
    assert result.cache_bytes is not None and result.cache_bytes["layers"][0]["mixer"] == mixer
    module = load_any(tmp_path / "checkpoints" / "last.ckpt", "cpu")[0]
    prompt = torch.tensor([[1, 2, 3]])
    cached, recomputed = (generate(module, prompt, 12, top_k=1, use_cache=use) for use in (True, False))
    assert torch.equal(cached, recomputed)
    return module
