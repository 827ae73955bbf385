"""Models built around the attention zoo."""
