"""andrea-train: the Hydra app that trains any model of the zoo.

    andrea-train                                   # the repetition task, sdpa, causal, MHA, on CPU
    andrea-train experiment=lookback attention=eager heads=gqa
    andrea-train -m attention=naive,eager,sdpa heads=mha,gqa
    andrea-train --help | --cfg job | -m ... | --shell-completion install=bash
"""

from __future__ import annotations

import logging
import sys
import warnings

import hydra
from omegaconf import DictConfig

from andrea.config import ConfigError, is_multirun, validate


@hydra.main(version_base="1.3", config_path="pkg://andrea.conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    try:
        validate(cfg)  # a bad config is refused before Lightning (seconds to import) is even loaded
    except ConfigError as err:
        if is_multirun():
            raise  # the job is marked failed in the sweep summary
        print(f"andrea-train: error: {err}", file=sys.stderr)
        sys.exit(2)

    from andrea.pipeline import train

    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # a deprecation inside Lightning itself
    # `import lightning` adds a console handler of its own; Hydra's root handlers already print
    # (and file) every record, so keep one copy of each line.
    lightning_logger = logging.getLogger("lightning")
    for handler in list(lightning_logger.handlers):
        lightning_logger.removeHandler(handler)

    from andrea.lit.module import NonFiniteLossError

    try:
        result = train(cfg, validated=True)
    except NonFiniteLossError as err:
        if is_multirun():
            raise
        print(f"andrea-train: error: {err}", file=sys.stderr)
        sys.exit(1)
    if result.get("status") == "interrupted":  # in a multirun this ends the sweep too
        sys.exit(128 + result["signal"])  # the shell's convention for "ended by a signal"
    metric = cfg.get("optimized_metric")
    return result.get(metric.replace("/", "_")) if metric else None


if __name__ == "__main__":
    main()
