"""andrea: a plugin-style attention model zoo with a Hydra-configured Lightning pipeline."""

__version__ = "0.1.0"
