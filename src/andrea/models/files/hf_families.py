"""The Hugging Face decoder families andrea reads in (`init_from=<folder>`, and their loaders), by config.json's
model_type: OLMo 3 (andrea.models.files.olmo3), Gemma 3's text model (gemma3), Llama 4's dense text model (llama4),
Qwen3-Next's dense model (qwen3_next), Falcon-H1 (falcon_h1, its multipliers at 1) and Kimi Linear's dense model
(kimi_linear); the last four are read, not written (the export writes OLMo 3 and Gemma 3). GPT-2 has its own reader
(andrea.models.files.gpt2)."""

from __future__ import annotations

from andrea.models.files import falcon_h1, gemma3, kimi_linear, llama4, olmo3, qwen3_next
from andrea.models.files.hf_folder import Family

READERS = (olmo3.READER, gemma3.READER, llama4.READER, qwen3_next.READER, falcon_h1.READER, kimi_linear.READER)
FAMILIES: dict[str, Family] = {reader.model_type: reader for reader in READERS}
