"""Model files: andrea's safetensors export, andrea-train's checkpoints, Hugging Face GPT-2 folders, and
the schema every reader checks a file's config against (data only: nothing a file names is imported
beyond andrea's own models and registered masks and backends)."""
