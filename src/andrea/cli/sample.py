"""andrea-sample: generate text from an andrea-train checkpoint or a safetensors export.

    andrea-sample ckpt_path=.../last.ckpt prompt="ROMEO:" max_new_tokens=100
    andrea-sample ckpt_path=model.safetensors temperature=0 cache=false
    andrea-sample ckpt_path=.../last.ckpt tokenizer=ids prompt="3 1 4 1"   # a synthetic-task model
    andrea-sample ckpt_path=.../last.ckpt stream.window=124 stream.keep_first=4 max_new_tokens=2000  # StreamingLLM

Every setting is checked before the model is loaded; a bad one is refused in one line.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Sequence

import hydra
import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from andrea.cli.app import SettingError, run_app
from andrea.cli.prompt import TokenIds, encode_prompt, pick_tokenizer
from andrea.data.tokenizers import TOKENIZERS, Tokenizer
from andrea.train.hydra_run import task_overrides
from andrea.train.keys import check_added_keys
from andrea.utils.rules import BOOLEAN, first_problem, integer, number, optional

MAX_TOKENS = 10_000_000  # num_samples x max_new_tokens held at once: ~100 bytes each, about 1 GB

SETTINGS = {
    "max_new_tokens": integer(1, MAX_TOKENS),
    "num_samples": integer(1, 1024),
    # below 1e-3 the scaled logits overflow float32: use 0 for the most likely token
    "temperature": ((lambda v: v == 0 or number(1e-3)[0](v)), "0 (greedy) or a finite number >= 0.001"),
    "top_k": optional(integer(1)),
    "top_p": optional(number(0.0, 1.0, low_open=True)),
    "seed": integer(0, 2**63 - 1),
    "cache": BOOLEAN,
    "ckpt_path": ((lambda v: isinstance(v, str) and v != ""), "the path of a .ckpt or .safetensors file"),
    "device": (
        (lambda v: isinstance(v, str) and re.fullmatch(r"cpu|cuda(:\d+)?", v) is not None),
        "cpu, cuda or cuda:<n>",
    ),
    "prompt": ((lambda v: isinstance(v, (str, int, float))), "text (or token ids with tokenizer=ids)"),
    "stream.window": optional(integer(1)),
    "stream.keep_first": integer(0),
}


def check_settings(cfg: DictConfig, overrides: Sequence[str] = ()) -> None:
    problem = check_added_keys(cfg, list(overrides))
    if problem:
        raise SettingError(problem)
    if OmegaConf.is_missing(cfg, "ckpt_path"):
        raise SettingError(
            "ckpt_path is required: give ckpt_path=<run dir>/checkpoints/last.ckpt or a .safetensors export"
        )
    problem = first_problem(SETTINGS, _flat(cfg))
    if problem:
        raise SettingError(problem)
    _check_stream(cfg)
    if cfg.num_samples * cfg.max_new_tokens > MAX_TOKENS:
        raise SettingError(
            f"max_new_tokens={cfg.max_new_tokens} x num_samples={cfg.num_samples} is more than {MAX_TOKENS:,} tokens "
            "to hold; generate fewer"
        )
    if cfg.tokenizer not in ("auto", "ids", *TOKENIZERS):
        raise SettingError(f"tokenizer={cfg.tokenizer!r} is not one of auto, ids, {', '.join(TOKENIZERS)}")
    if cfg.device != "cpu" and not torch.cuda.is_available():
        raise SettingError(f"device={cfg.device!r}: no GPU here; use device=cpu")


def _check_stream(cfg: DictConfig) -> None:
    """StreamingLLM's two settings, and what they need of each other and of the cache."""
    stream = cfg.get("stream")
    if not isinstance(stream, DictConfig) or set(stream) != {"window", "keep_first"}:
        raise SettingError(
            f"stream={OmegaConf.to_container(stream) if isinstance(stream, DictConfig) else stream!r} must hold "
            "stream.window and stream.keep_first (StreamingLLM's cache: the last `window` tokens and the first "
            "`keep_first`); set them, e.g. stream.window=124 stream.keep_first=4"
        )
    if stream.window is None and stream.keep_first:
        raise SettingError(
            f"stream.keep_first={stream.keep_first} keeps the first tokens of a streaming cache, and stream.window "
            "is null: give stream.window too (e.g. stream.window=124), or drop stream.keep_first"
        )
    if stream.window is not None and cfg.cache is False:
        raise SettingError(
            f"cache=false with stream.window={stream.window}: streaming is a cache (the first and the last tokens "
            "kept); drop cache=false, or stream.window"
        )


def _flat(cfg: DictConfig) -> dict[str, object]:
    """The settings by SETTINGS' keys: the stream's as stream.window and stream.keep_first."""
    stream = cfg.stream if isinstance(cfg.get("stream"), DictConfig) else {}  # else refused by _check_stream
    return {str(key): value for key, value in cfg.items()} | {f"stream.{key}": value for key, value in stream.items()}


@hydra.main(version_base="1.3", config_path="pkg://andrea.conf", config_name="sample")
def sample_app(cfg: DictConfig) -> None:
    from andrea.models.files.load import load_any
    from andrea.models.generate import stream
    from andrea.models.network import network

    try:
        check_settings(cfg, task_overrides())
        net, _, trained_with = load_any(cfg.ckpt_path, cfg.device)
        vocab_size = network(net).vocab_size
        tokenizer = pick_tokenizer(cfg.tokenizer, trained_with, vocab_size)
        prompt = encode_prompt(tokenizer, str(cfg.prompt), vocab_size)  # prompt=3 arrives as an int
        generator = torch.Generator(cfg.device).manual_seed(cfg.seed)
        idx = torch.tensor([prompt] * cfg.num_samples, device=cfg.device)  # (num_samples, T)
        start = time.perf_counter()
        steps = stream(
            net,
            idx,
            cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_k=cfg.top_k,
            top_p=cfg.top_p,
            generator=generator,
            use_cache=cfg.cache,
            window=cfg.stream.window,
            keep_first=cfg.stream.keep_first,
        )  # fmt: skip  (refuses a cache the model's masks cannot serve, a stream the model cannot number)
    except (SettingError, ValueError, FileNotFoundError) as err:
        print(f"andrea-sample: error: {err}", file=sys.stderr)
        sys.exit(2)

    if cfg.num_samples == 1:  # a terminal or a pipe: each token printed as it comes
        new = _stream_text(tokenizer, prompt, steps)
    else:  # several samples generated side by side: the whole texts at the end
        new = torch.cat([token for token, _ in steps], dim=1)  # (num_samples, max_new_tokens)
        for i, row in enumerate(new.tolist()):
            if cfg.num_samples > 1:
                print(f"--- sample {i + 1}")
            print(tokenizer.decode(prompt + row))
    seconds = time.perf_counter() - start
    print(
        f"[{new.numel()} tokens in {seconds:.2f} s, {new.numel() / seconds:.1f} tokens/s, cache={_cache_word(cfg)}]",
        file=sys.stderr,
    )


def _cache_word(cfg: DictConfig) -> str:
    if cfg.stream.window is not None:
        return f"streaming (first {cfg.stream.keep_first} + last {cfg.stream.window})"
    return "on" if cfg.cache else "off"


def _stream_text(tokenizer: Tokenizer | TokenIds, prompt: list[int], steps: Iterator[tuple[Tensor, Tensor]]) -> Tensor:
    """Print the prompt, then each new token's text as soon as it is sampled; returns the new ids (1, N).

    The text is decoded from the start each time and only what is new is printed, so a character
    split across tokens (a byte-level tokenizer's UTF-8) appears once it is whole."""
    ids, shown = list(prompt), tokenizer.decode(prompt)
    print(shown, end="", flush=True)
    new = []
    for token, _ in steps:
        new.append(token)
        ids.append(int(token[0, 0]))
        text = tokenizer.decode(ids)
        if not text.endswith("\ufffd") and text.startswith(shown):  # a whole character, and no retokenised past
            print(text[len(shown) :], end="", flush=True)
            shown = text
    text = tokenizer.decode(ids)
    print(text[len(shown) :] if text.startswith(shown) else "", flush=True)  # a last partial character, if any
    return torch.cat(new, dim=1) if new else torch.zeros(1, 0, dtype=torch.long)


def main() -> None:
    run_app("andrea-sample", sample_app)


if __name__ == "__main__":
    main()
