"""Text as training data: any local text file or folder becomes a memory-mapped token cache.

The cache is made once and keyed by the content of every file and the tokenizer,
so an edited file or another tokenizer makes a new one. Documents are joined
with the tokenizer's end-of-text id; ids are stored as uint16 where the
vocabulary fits. The last `val_fraction` of the tokens is the validation split.
Training draws `samples_per_epoch` random context windows, a new draw every
epoch (any token may start one); validation walks consecutive windows. With
`bos`, every window starts with the tokenizer's end-of-text id as its first input
(a beginning-of-sequence token, as GPT-2 and Llama see one before every text), so
the first position of every context is the same learned token.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from andrea.data.sampler import ResumableTrainData
from andrea.data.settings import DATA
from andrea.data.tokenizers import TOKENIZERS, Tokenizer, tokenizer_vocab_size
from andrea.utils.files import SPECIAL_FILES, atomic_write
from andrea.utils.rules import enforce

EXCERPT = Path(__file__).parent / "corpus" / "tempest_excerpt.txt"


DEFAULT_MAX_BYTES = 2 * 1024**3  # data.max_bytes: more text than this is read only when the limit is raised


def text_files(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES, key: str = "data.path") -> list[Path]:
    """The text files under `path`: regular files only, and no more than `max_bytes` of them in all; a
    refusal names the setting `key`."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{key}={path} does not exist; give a text file or a folder of .txt files")
    files = sorted(p for p in path.rglob("*.txt") if not p.is_dir()) if path.is_dir() else [path]
    for file in files:
        _check_regular(file, key)
    if not files:
        raise ValueError(f"{key}={path} holds no .txt file")
    total = sum(file.stat().st_size for file in files)
    if total > max_bytes:
        raise ValueError(
            f"{key}={path} holds {total:,} bytes of text, more than data.max_bytes={max_bytes:,}; "
            f"to tokenise it all, confirm with data.max_bytes={total}"
        )
    return files


def _check_regular(file: Path, key: str) -> None:
    """A file andrea can read to its end: not a dangling link, a FIFO or socket (reading would block) or a
    device (/dev/zero: it would never end)."""
    if not file.exists():
        raise ValueError(f"{key}: {file} is a link to nothing; remove it or point it at a text file")
    kind = SPECIAL_FILES.get(stat.S_IFMT(file.stat().st_mode))
    if kind:
        raise ValueError(f"{key}: {file} is {kind}, not a text file; give a regular file or a folder of them")


def decode_text(path: Path, data: bytes, key: str = "data.path") -> str:
    """A file's bytes as text, refusing what is not UTF-8 or holds no text (naming the setting `key`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{key}: {path} is not UTF-8 text (byte {err.start}: {data[err.start : err.start + 4]!r}); convert "
            "it to UTF-8"
        ) from None
    if not text.strip():
        raise ValueError(f"{key}: {path} is empty; give a file with text in it, or remove it from the folder")
    return text


def cache_key(tokenizer_name: str, contents: list[tuple[Path, bytes]]) -> str:
    """What the cached tokens depend on: the tokenizer, and every file's path and bytes in order (each file
    ends with an end-of-text token, so where one file stops and the next starts matters). Every part is
    length-prefixed: no two different inputs hash the same stream."""
    digest = hashlib.sha256()
    for part in (tokenizer_name.encode(), *(item for path, data in contents for item in (str(path).encode(), data))):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()[:16]


def build_cache(files: list[Path], tokenizer: Tokenizer, cache_dir: Path) -> Path:
    """Tokenise `files` into `<cache_dir>/<key>.bin` (once) and return its path. Each file is read once: the
    bytes hashed are the bytes tokenised."""
    contents = [(path, path.read_bytes()) for path in files]
    dtype = np.uint16 if tokenizer.vocab_size <= 2**16 else np.uint32
    cache = cache_dir / f"{tokenizer.name}-{cache_key(tokenizer.name, contents)}.{np.dtype(dtype).name}.bin"
    if cache.exists() and cache_meta(cache) is not None:
        return cache  # else a cache whose description was edited or lost, or whose tokens changed: made again
    ids: list[int] = []
    for path, data in contents:
        ids.extend(tokenizer.encode(decode_text(path, data)))
        ids.append(tokenizer.eot_id)
    tokens = np.asarray(ids, dtype=dtype)
    meta = {
        "tokens": len(ids),
        "dtype": np.dtype(dtype).name,
        "tokenizer": tokenizer.name,
        "files": list(map(str, files)),
        "sha256": hashlib.sha256(tokens.tobytes()).hexdigest(),  # of the .bin: what cache_meta checks
    }
    try:
        with atomic_write(cache) as partial:  # a crash never leaves half a cache under the final name
            tokens.tofile(partial)
        with atomic_write(cache.with_suffix(".json")) as partial:  # written last: a cache without it is redone
            partial.write_text(json.dumps(meta, indent=2))
    except OSError as err:
        raise ValueError(
            f"data.cache_dir={cache_dir}: the token cache cannot be written there ({err.strerror or err}); "
            "give a writable folder"
        ) from None
    return cache


def cache_meta(cache: Path) -> dict | None:
    """A token cache's description, if it still describes the cache: the JSON reads, its dtype is the file
    name's, its token count the file's size, and its hash the file's bytes (a description edited by hand, or
    tokens changed since, is not trusted: None, and the cache is made again)."""
    try:
        meta = json.loads(cache.with_suffix(".json").read_text())
        dtype = np.dtype(meta["dtype"])
        named = dtype.name == cache.suffixes[-2].lstrip(".")  # <tokenizer>-<key>.<dtype>.bin
        fits = named and int(meta["tokens"]) * dtype.itemsize == cache.stat().st_size
        digest = hashlib.sha256()
        with cache.open("rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    return meta if fits and digest.hexdigest() == meta.get("sha256") else None


class Windows(Dataset):
    """Windows starting every `stride` tokens: (input_ids, labels), seq_len of each.

    stride 1 (training): every possible start, the sampler picks which; stride
    seq_len (validation): consecutive, non-overlapping windows. A window is seq_len + 1
    tokens, its inputs all but the last and its labels all but the first; with a `bos` id,
    seq_len tokens, its inputs the bos id and all but the last, its labels every one.
    """

    def __init__(self, tokens: np.ndarray, seq_len: int, stride: int = 1, bos: int | None = None) -> None:
        self.tokens, self.seq_len, self.stride, self.bos = tokens, seq_len, stride, bos
        self.span = seq_len if bos is not None else seq_len + 1  # the text tokens one window reads

    def __len__(self) -> int:
        return (len(self.tokens) - self.span) // self.stride + 1

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        start = index * self.stride
        window = torch.from_numpy(self.tokens[start : start + self.span].astype(np.int64))
        if self.bos is not None:
            window = torch.cat([torch.tensor([self.bos]), window])
        return {"input_ids": window[:-1], "labels": window[1:]}


class TextDataModule(ResumableTrainData, L.LightningDataModule):
    name = "text"

    def __init__(
        self,
        path: str | None = None,  # None: the excerpt that ships with andrea
        tokenizer: str = "gpt2",
        vocab_size: int | None = None,  # the model's; must be the tokenizer's
        seq_len: int = 256,
        batch_size: int = 8,
        samples_per_epoch: int = 2048,
        val_fraction: float = 0.1,
        cache_dir: str | None = None,
        seed: int = 0,
        num_workers: int = 0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        bos: bool = False,  # every window starts with the end-of-text id (a BOS token)
    ) -> None:
        super().__init__()
        tokenizer_vocab = tokenizer_vocab_size(tokenizer)
        if vocab_size is not None and vocab_size != tokenizer_vocab:
            raise ValueError(
                f"data.vocab_size={vocab_size} but data.tokenizer={tokenizer} has {tokenizer_vocab} ids; drop the "
                "override"
            )
        sizes = dict(seq_len=seq_len, batch_size=batch_size, samples_per_epoch=samples_per_epoch)
        others = dict(val_fraction=val_fraction, num_workers=num_workers, max_bytes=max_bytes, bos=bos)
        enforce(DATA, sizes | others, "data.")
        self.files = text_files(path or EXCERPT, max_bytes)  # refuses a missing or special path before any read
        self.tokenizer_name, self.seq_len, self.batch_size = tokenizer, seq_len, batch_size
        self.samples_per_epoch, self.val_fraction, self.seed, self.num_workers = (
            samples_per_epoch,
            val_fraction,
            seed,
            num_workers,
        )
        self.bos = bos
        self.cache_dir = Path(cache_dir or Path.home() / ".cache" / "andrea" / "tokens")
        self.vocab_size = tokenizer_vocab
        self.tokens: np.ndarray | None = None
        self.num_train = samples_per_epoch  # rows per epoch, as the synthetic tasks report
        self.cache = build_cache(self.files, self.tokenizer, self.cache_dir)  # refuses empty or non-UTF-8 text
        tokens = json.loads(self.cache.with_suffix(".json").read_text())["tokens"]
        split = int(tokens * (1 - val_fraction))
        if min(split, tokens - split) <= seq_len:  # refused while the config is checked, not in setup()
            raise ValueError(
                f"data.path holds {tokens} tokens: too few for data.seq_len={seq_len} in both splits; "
                "give more text or a shorter seq_len"
            )

    @property
    def tokenizer(self) -> Tokenizer:
        return TOKENIZERS[self.tokenizer_name]()

    def setup(self, stage: str | None = None) -> None:
        if self.tokens is not None:
            return
        dtype = json.loads(self.cache.with_suffix(".json").read_text())["dtype"]
        self.tokens = np.memmap(self.cache, dtype=dtype, mode="r")
        split = int(len(self.tokens) * (1 - self.val_fraction))
        bos = self.tokenizer.eot_id if self.bos else None
        self.train_set = Windows(self.tokens[:split], self.seq_len, bos=bos)
        self.val_set = Windows(self.tokens[split:], self.seq_len, stride=self.seq_len, bos=bos)

    def train_dataloader(self) -> DataLoader:
        sampler = self.train_sampler(len(self.train_set), self.samples_per_epoch, self.seed, self.batch_size)
        return DataLoader(
            self.train_set, self.batch_size, sampler=sampler, drop_last=True, num_workers=self.num_workers
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.batch_size, num_workers=self.num_workers)

    def probe_batch(self, n: int = 4) -> dict[str, torch.Tensor]:
        self.setup()
        rows = [self.val_set[i] for i in range(min(n, len(self.val_set)))]
        return {key: torch.stack([row[key] for row in rows]) for key in ("input_ids", "labels")}

    def streams(self, n: int, length: int) -> torch.Tensor:
        """(n, length) ids: n consecutive stretches of the held-out text, each as training sees a context begin
        (with `bos`, its first id the BOS and length - 1 text tokens after it)."""
        self.setup()
        text = length - int(self.bos)
        held_out = self.val_set.tokens  # the validation split, as setup() cut it
        if len(held_out) < n * text:
            raise ValueError(f"the held-out text has {len(held_out)} tokens: fewer than {n} x {text}")
        ids = torch.from_numpy(held_out[: n * text].astype(np.int64)).view(n, text)
        if self.bos:
            ids = torch.cat([torch.full((n, 1), self.tokenizer.eot_id), ids], dim=1)
        return ids
