"""sparsemax attention for andrea: a mechanism plugin (andrea_sparsemax.mechanism)."""
