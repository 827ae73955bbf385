"""Looking inside a network: hook points, the activation cache and hooks (cache.py), activation patching,
direct logit attribution, composition scores, interventions, head-role metrics, verdicts, attention maps and
the explorer page. Imports attention, models and data; never train or cli. docs/lens.md walks through it."""

from andrea.lens.cache import ActivationCache, add_hooks, hooks, run_with_cache

__all__ = ["ActivationCache", "add_hooks", "hooks", "run_with_cache"]
