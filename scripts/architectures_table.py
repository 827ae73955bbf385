"""The table of docs/architectures.md, made from the presets themselves: each preset's pattern of layer kinds, what
each kind is, and the KV cache one sequence keeps per token at a 4,096-token context, beside the same network with
full attention in every layer (float32 numbers, 4 bytes each).

    python scripts/architectures_table.py        # prints the table; tests/models/test_architectures_page.py
                                                 # checks that docs/architectures.md holds it as printed
"""

from __future__ import annotations

from itertools import groupby

import torch
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from andrea.mixers.layer_spec import LayerSpec
from andrea.models.network import cache_bytes, network

PRESETS = {
    "gemma3": "tests/models/test_gemma3.py",
    "olmo3": "tests/models/test_olmo3.py",
    "llama4": "tests/models/test_llama4.py",
    "gpt-oss": "tests/models/test_gpt_oss.py",
    "qwen3-next": "tests/models/test_qwen3_next.py",
    "falcon-h1": "tests/models/test_falcon_h1.py",
    "kimi-linear": "tests/models/test_kimi_linear.py",
    "deepseek-v32": "tests/models/test_deepseek_v32.py",
}  # each architecture preset, and the test proving it
CONTEXT, BYTES = 4096, 4


def _net(preset: str) -> torch.nn.Module:
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"model={preset}", f"model.net.max_context={CONTEXT}"])
    with torch.device("meta"):  # sizes only
        return instantiate(cfg.model.net)


def _per_token(net: torch.nn.Module) -> tuple[int, int]:
    """Bytes a token of the cache at CONTEXT tokens: as the layers keep it (a window its window only), and with
    every layer keeping every token (the same heads, full attention)."""
    kept = sum(layer["bytes"] for layer in cache_bytes(network(net), CONTEXT, BYTES)["layers"])
    sizes = [mixer.cache_size() for mixer in network(net).mixers]
    full = sum(size.per_sequence + size.per_token * CONTEXT for size in sizes) * BYTES
    return kept // CONTEXT, full // CONTEXT


def _pattern(specs: list[LayerSpec]) -> str:
    runs = [(kind, len(list(group))) for kind, group in groupby(spec.kind for spec in specs)]
    return ", ".join(kind if count == 1 else f"{kind} x{count}" for kind, count in runs)


def _kind(spec: LayerSpec) -> str:
    settings = spec.settings
    if spec.parts:
        return f"{spec.kind}: " + " + ".join(_kind(part).split(": ", 1)[1] for part in spec.parts)
    if not spec.attention:
        return f"{spec.kind}: {spec.mixer}"
    mask = settings["mask"] if isinstance(settings["mask"], dict) else {}
    seen = f"causal window {mask['window']}" if "window" in mask else "causal"
    seen = f"causal chunks of {mask['size']}" if "size" in mask else seen
    n_head, n_kv = settings["n_head"], settings.get("n_kv_head") or settings["n_head"]
    heads = f"{n_head} heads ({n_kv} key/value)"
    if settings.get("latent"):
        latent = settings["latent"]
        heads = f"{n_head} latent heads (a latent of {latent['kv_rank']}, a shared key part of {latent['rope_dim']})"
    return f"{spec.kind}: {seen}, {heads}, {_position(settings)}, {_mechanism(settings)}{_selection(settings)}"


def _selection(settings: dict) -> str:
    """A selection of keys, its name and how many it keeps: DSA's top-k, MoBA's and NSA's blocks."""
    selection = settings.get("selection")
    if not isinstance(selection, dict) or selection.get("name", "none") == "none":
        return ""
    kept = f"top {selection['topk']} keys" if "topk" in selection else f"{selection.get('topk_blocks')} blocks"
    return f", {selection['name'].upper()} ({kept})"


def _position(settings: dict) -> str:
    if settings["position"] == "none":
        return "NoPE" + (" with temperature" if settings.get("temperature") else "")
    position = f"RoPE base {settings['rope_base']:,.0f}"
    if settings.get("rope_fraction", 1.0) != 1.0:
        position += f" on {settings['rope_fraction']:g} of the head"
    if settings.get("rope_yarn"):
        position += f" (YaRN x{settings['rope_yarn']['factor']:g})"
    return position + (" interleaved" if settings.get("rope_interleaved") else "")


def _mechanism(settings: dict) -> str:
    mechanism = settings.get("mechanism") or {}
    if not isinstance(mechanism, dict):
        return str(mechanism)
    extra = f" per {mechanism['over']}" if mechanism.get("over") else ""
    return mechanism.get("name", "softmax") + extra + (" without gain" if mechanism.get("gain") is False else "")


def table() -> str:
    lines = ["| preset | pattern | its kinds | KV cache a token at 4k | full attention | proven by |",
             "|---|---|---|---:|---:|---|"]  # fmt: skip
    for preset, test in PRESETS.items():
        net = _net(preset)
        specs = list(network(net).layer_specs)
        kinds = "; ".join(_kind(next(s for s in specs if s.kind == k)) for k in dict.fromkeys(s.kind for s in specs))
        kept, full = _per_token(net)
        lines.append(f"| `model={preset}` | {_pattern(specs)} | {kinds} | {kept:,} B | {full:,} B | `{test}` |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
