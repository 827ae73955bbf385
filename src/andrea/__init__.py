"""andrea: a plugin-style attention model zoo with a Hydra-configured Lightning pipeline.

The house, bottom layer first (each imports only the ones above it in this list):

    utils/      value rules and file writes every layer shares (torch only)
    attention/  the zoo: contract, registry, backends, masks, positions, heads, block, KV cache
    models/     networks, generation, and model files (checkpoints, safetensors, GPT-2 import)
    data/       the synthetic tasks and text, as Lightning data modules
    lens/       looking inside: head-role metrics, verdicts, maps, explorer, interventions
    train/      the training application: config checks, Hydra run, Lightning module and callbacks, sweeps
    cli/        thin entry points, one per console script
    testing/    the conformance kit for backends and masks (`pytest --pyargs andrea.testing`)
    bench/      timing and memory helpers for scripts/bench_*.py

`import andrea` imports nothing else: what composing the configs needs is registered by andrea.conf
(andrea.train.resolvers.register).
"""

__version__ = "0.1.0"
