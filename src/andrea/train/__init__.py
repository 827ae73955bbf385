"""The training application: config checks, the Hydra run and its run dir, the Lightning module and
callbacks (lit/), sweep summaries. Imports every layer below it; never cli. What composing its configs needs
is registered by andrea.train.resolvers.register() (andrea.conf calls it)."""
