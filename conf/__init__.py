"""andrea's config groups, installed as the package andrea.conf. Hydra imports it to read them
(pkg://andrea.conf), so this is where what composing them needs is registered, whoever composes
(andrea-train, a test, a notebook's compose()): the `${andrea.*}` resolvers, the config groups of
installed plugins and hydra/launcher=slurm's settings (andrea.train.resolvers.register)."""

from andrea.train.resolvers import register

register()
