"""Attention backends: one file each, all behind andrea.attention.contract."""
