"""The Hugging Face decoder families andrea reads in (`init_from=<folder>`, and their loaders), by config.json's
model_type: OLMo 3 (andrea.models.files.olmo3), Gemma 3's text model (gemma3) and Llama 4's dense text model
(llama4, read only: the export writes OLMo 3 and Gemma 3). GPT-2 has its own reader
(andrea.models.files.gpt2)."""

from __future__ import annotations

from andrea.models.files import gemma3, llama4, olmo3
from andrea.models.files.hf_folder import Family

FAMILIES: dict[str, Family] = {reader.model_type: reader for reader in (olmo3.READER, gemma3.READER, llama4.READER)}
