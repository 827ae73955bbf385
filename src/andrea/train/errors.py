"""The one error a training config is refused with: a line that names the key and the fix."""


class ConfigError(ValueError):
    """A composed config that cannot run."""
