"""andrea-demo: one attention block, composed by Hydra, run on every backend side by side.

    andrea-demo                                   # sdpa, causal, MHA
    andrea-demo mask=sliding_window mask.window=4 heads=gqa
    andrea-demo --cfg job                         # show the composed config

Prints how far each backend that can run here is from `naive` on the same weights
and input, and how long a call takes once warm (names each one that cannot run, with
its reason), one head's attention weights as a text heatmap, and writes PNGs of the
mask and of every head's weights into a dated folder of its own,
logs/demo/<date>_<time>, which it names.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import cast

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.table import Table

from andrea.attention import MultiHeadSelfAttention, UnsupportedAttentionError, backend_registry
from andrea.bench.timing import median_ms
from andrea.cli.app import run_app
from andrea.lens.grid_png import save_attention_grid
from andrea.lens.viz import weights_as_text

# A backend's first call pays for what it does once (flex compiles its kernel, a seconds' affair on a CPU; the others
# allocate and warm their caches): each is timed after a warm-up call, as the median of this many calls, in rounds
# that interleave the backends so that a noisy neighbour falls on all of them alike (andrea.bench.timing).
TIMED_CALLS = 20


@hydra.main(version_base="1.3", config_path="pkg://andrea.conf", config_name="attention_demo")
def demo_app(cfg: DictConfig) -> None:
    console = Console()
    torch.manual_seed(cfg.seed)
    block: MultiHeadSelfAttention = instantiate(cfg.block)
    x = torch.randn(1, cfg.seq_len, block.d_model)
    console.print(f"[bold]block[/bold] {block.extra_repr()}")

    mechanism = cast(dict, OmegaConf.to_container(cfg.block.mechanism, resolve=True))  # each block builds its own
    latent = cast(dict | None, OmegaConf.to_container(cfg.block.latent) if cfg.block.latent is not None else None)
    results, cannot, blocks = {}, {}, {}  # backend -> (output, weights); -> why it cannot run here; -> its block
    for name in backend_registry.names():
        if name == "flex" and x.device.type == "cpu":
            console.print(
                "flex: its first call traces and compiles its kernel, on a CPU up to half a minute the first time"
            )
        try:
            other = MultiHeadSelfAttention(
                block.d_model, block.heads.n_head, block.heads.n_kv_head, backend=name,
                mask=block.mask, max_context=block.max_context, mechanism=mechanism, latent=latent,
            )  # fmt: skip
            other.backend.check(mask=other.mask, device=x.device, needs_grad=False, score_mod=other.score_mod)
        except UnsupportedAttentionError as refused:
            cannot[name] = str(refused)
            continue
        other.load_state_dict(block.state_dict())
        with torch.no_grad():
            results[name] = other(x, return_weights=True)
        blocks[name] = other
    with torch.no_grad():  # a call as a model makes it, without the weights the comparison asked for
        ms = median_ms({name: partial(b, x) for name, b in blocks.items()}, repeats=TIMED_CALLS, warmup=1)

    y_ref, w_ref = results["naive"]
    table = Table("backend", "max |out - naive|", "max |weights - naive|", f"warm ms (median of {TIMED_CALLS})")
    for name, (y, weights) in results.items():
        table.add_row(name, f"{(y - y_ref).abs().max():.1e}", f"{(weights - w_ref).abs().max():.1e}", f"{ms[name]:.2f}")
    console.print(table)
    for name, reason in cannot.items():
        console.print(f"not run here: {name}: {reason}", markup=False, highlight=False)

    with torch.no_grad():
        _, weights = block(x, return_weights=True)  # (1, H, T, T)
    console.print(
        f"head 0 of backend '{block.backend.name}', mechanism {block.mechanism.name} "
        f"({block.mechanism.weights_meaning}), mask {block.mask.name} (rows: queries, columns: keys)"
    )
    console.print(weights_as_text(weights[0, 0]))
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    mask_png = block.mask.draw(run_dir / "mask.png", length=cfg.seq_len)
    hidden = None if block.mask.batch_dependent else (~block.mask.dense(cfg.seq_len, cfg.seq_len)[0]).numpy()
    maps_png = save_attention_grid(
        weights[0], run_dir / "attention_heads.png", f"{block.mask.name} · {block.mechanism.label}",
        signed=block.mechanism.signed, subtitle=block.mechanism.weights_meaning, masked=hidden,
    )  # fmt: skip
    console.print(f"wrote into {run_dir}: {Path(mask_png).name} (the mask) and {Path(maps_png).name} (every head)")


def main() -> None:
    run_app("andrea-demo", demo_app)


if __name__ == "__main__":
    main()
