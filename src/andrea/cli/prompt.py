"""The prompt of andrea-sample and andrea-inspect: the tokenizer a model was trained with (or token ids),
and the prompt encoded and checked against the model's vocabulary."""

from __future__ import annotations

from andrea.cli.app import SettingError
from andrea.data.tokenizers import TOKENIZERS, Tokenizer


class TokenIds:
    """The identity "tokenizer" of the synthetic tasks: a prompt of space-separated token ids."""

    name, eot_id = "ids", None

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        try:
            ids = [int(word) for word in text.split()]
        except ValueError:
            raise SettingError(f"prompt={text!r} must be space-separated token ids with tokenizer=ids") from None
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(map(str, ids))


def pick_tokenizer(name: str, trained_with: str | None, vocab_size: int) -> Tokenizer | TokenIds:
    if name == "auto":
        name = trained_with or "ids"
    tokenizer = TokenIds(vocab_size) if name == "ids" else TOKENIZERS[name]()
    if tokenizer.vocab_size > vocab_size:
        raise SettingError(f"tokenizer={name} has {tokenizer.vocab_size} tokens, the model only {vocab_size}")
    return tokenizer


def encode_prompt(tokenizer: Tokenizer | TokenIds, prompt: str, vocab_size: int) -> list[int]:
    ids = tokenizer.encode(prompt) if prompt else [tokenizer.eot_id] if tokenizer.eot_id is not None else []
    if not ids:
        raise SettingError('prompt is empty and tokenizer=ids has no end-of-text token; give prompt="<ids>"')
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise SettingError(f"prompt holds token id {bad[0]}, outside the model's vocabulary 0..{vocab_size - 1}")
    return ids


def token_labels(tokenizer: object, ids: list[int]) -> list[str]:
    """Each token as the pages show it: its id (tokenizer=ids), or its decoded text."""
    if isinstance(tokenizer, TokenIds):
        return [str(i) for i in ids]
    return [tokenizer.decode([i]) for i in ids]  # type: ignore[attr-defined]  # a Tokenizer
