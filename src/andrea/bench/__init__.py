"""Timing and memory helpers for scripts/bench_*.py (timing.py), and the private torch API they read."""
