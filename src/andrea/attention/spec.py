"""What an attention layer is, written once: each setting with its default and its rule (AttentionSpec).

The Hydra config (train.yaml's `attention_block`, as model.net.attention), a model file's `attention` and
MultiHeadSelfAttention's keywords are each read into one spec; the spec checks itself, naming each setting
the way its reader names it (`heads.n_kv_head` in a config, `<file>: andrea_net_config.attention.n_kv_head`
in a file), and the block is built from it.

    d_model, max_context, bias, dropout       the network's: its width, context, biases and dropout
    n_head, n_kv_head                         query heads, and key/value heads (None: as many, MHA)
    head_dim                                  each head's width (None: d_model / n_head; Gemma 3 270M: 256 of 640 / 4)
    backend, backend_options                  a registered backend's name (or one built) and its options
    mechanism                                 None (softmax), a registered name, or {name, its settings}
    mask                                      an expression, {name, fields}, a Mask, or None (no mask)
    latent                                    heads=mla's sizes (andrea.attention.latent), or None
    selection                                 None, a registered selection's name, or {name, its settings}: the
                                              keys each query attends to, chosen from the data (dsa, moba, nsa)
    position                                  rope or alibi act inside the layer; learned and none outside
    rope_base, rope_fraction                  RoPE's base, and the share of each head it turns (partial RoPE)
    rope_yarn                                 None, or YaRN's settings for RoPE (andrea.attention.positions.yarn)
    rope_interleaved                          RoPE turns adjacent channel pairs (GPT-J, Llama 4), not the halves
    temperature                               None, or a query scale growing with log position (positions.temperature)

Values a part owns (a mask's window, a mechanism's eps, a backend's options) are checked by that part when
the block builds it; the spec checks the names and the numbers the block itself needs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from andrea.attention.heads import HeadConfig, heads_problem
from andrea.attention.positions import POSITIONS
from andrea.utils.rules import SettingError

if TYPE_CHECKING:
    from andrea.attention.contract import AttentionBackend
    from andrea.attention.masks import Mask
    from andrea.attention.mechanisms import Mechanism

# how a config names each setting (train.yaml joins the groups into model.net.attention)
CONFIG_KEYS = {
    "d_model": "model.net.d_model", "max_context": "model.net.max_context", "bias": "model.net.bias",
    "dropout": "model.net.dropout", "n_head": "heads.n_head", "n_kv_head": "heads.n_kv_head",
    "head_dim": "heads.head_dim",
    "backend": "attention.backend", "backend_options": "attention.options", "mechanism": "mechanism",
    "mask": "mask", "latent": "heads.latent", "selection": "selection", "position": "position.kind",
    "rope_base": "position.base",
    "rope_fraction": "position.fraction", "rope_yarn": "position.yarn",
    "rope_interleaved": "position.interleaved", "temperature": "position.temperature",
}  # fmt: skip


NETWORK = ("d_model", "max_context", "bias", "dropout", "position")  # what the network gives each layer
# null in a config: the spec's default (position groups without them)
DEFAULTED = ("rope_base", "rope_fraction", "rope_interleaved")


@dataclass(frozen=True)
class AttentionSpec:
    d_model: int
    n_head: int
    n_kv_head: int | None = None
    head_dim: int | None = None
    backend: str | AttentionBackend = "sdpa"
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    mechanism: str | Mapping[str, Any] | Mechanism | None = None
    mask: str | Mapping[str, Any] | Mask | None = "causal"
    latent: Mapping[str, Any] | None = None
    selection: str | Mapping[str, Any] | None = None
    position: str = "none"
    rope_base: float = 10000.0
    rope_fraction: float = 1.0
    rope_yarn: Mapping[str, Any] | None = None
    rope_interleaved: bool = False
    temperature: Mapping[str, Any] | None = None
    max_context: int = 1024
    bias: bool = False
    dropout: float = 0.0

    @classmethod
    def read(cls, settings: Mapping[str, Any], names: Mapping[str, str] = CONFIG_KEYS) -> AttentionSpec:
        """A spec from a mapping of its settings (a config node, a file's attention and the network's sizes);
        a key it has no setting for is refused with the closest one. A null backend_options is none."""
        known = [f.name for f in fields(cls)]
        for key in settings:
            if key not in known:
                match = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                hint = f" (did you mean {match[0]}?)" if match else ""
                raise SettingError(str(key), f"is not an attention setting{hint}")
        if "n_head" not in settings:
            raise SettingError(names.get("n_head", "n_head"), "is missing")
        given = {key: value for key, value in settings.items() if value is not None or key not in DEFAULTED}
        return cls(**{**given, "backend_options": settings.get("backend_options") or {}})

    def checked(self, names: Mapping[str, str] = CONFIG_KEYS) -> AttentionSpec:
        """The spec itself, once every rule holds; else the first SettingError, keyed as `names` names it."""
        problem = (
            heads_problem(self.n_head, self.kv_heads, names["n_head"], names["n_kv_head"])
            or self._size_problem(names)
            or self._name_problem(names)
        )
        if problem:
            raise problem
        return self

    @property
    def kv_heads(self) -> int:
        """n_kv_head, or n_head where it is None (MHA)."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def width(self) -> int:
        """Each head's width: head_dim, or d_model / n_head."""
        return self.head_dim or self.d_model // self.n_head

    @property
    def heads(self) -> HeadConfig:
        return HeadConfig(self.n_head, self.kv_heads)

    def with_(self, **changes: Any) -> AttentionSpec:
        return replace(self, **changes)

    @classmethod
    def settings(cls) -> tuple[str, ...]:
        """What model.net.attention (and a model file's `attention`) holds: every setting but the network's."""
        return tuple(f.name for f in fields(cls) if f.name not in NETWORK)

    def _size_problem(self, names: Mapping[str, str]) -> SettingError | None:
        if not isinstance(self.max_context, int) or isinstance(self.max_context, bool) or self.max_context <= 0:
            return SettingError(names["max_context"], f"={self.max_context!r} must be a positive integer")
        if self.head_dim is None:
            return self.heads.width_problem(self.d_model, names["d_model"], names["n_head"])
        if not isinstance(self.head_dim, int) or isinstance(self.head_dim, bool) or self.head_dim <= 0:
            return SettingError(names["head_dim"], f"={self.head_dim!r} must be a positive integer, or null "
                                "(d_model / n_head)")  # fmt: skip
        if self.latent is not None:
            return SettingError(names["head_dim"], "with heads=mla: latent attention's heads are d_model / n_head wide")
        return None

    def _name_problem(self, names: Mapping[str, str]) -> SettingError | None:
        from andrea.attention.contract import AttentionBackend
        from andrea.attention.latent import settings_problem
        from andrea.attention.registry import backend_registry

        available = ", ".join(backend_registry.names())
        if not isinstance(self.backend, (str, AttentionBackend)):  # a list or mapping from a config or a file
            return SettingError(names["backend"], f"={self.backend!r} must be a backend's name, one of {available}")
        if isinstance(self.backend, str) and self.backend not in backend_registry.names():
            return SettingError(names["backend"], f"={self.backend!r} is unknown; available: {available}")
        if self.position not in POSITIONS:  # a typo would silently mean "no position" otherwise
            return SettingError(names["position"], f"={self.position!r} is not one of {', '.join(POSITIONS)}")
        problem = None if self.latent is None else settings_problem(self.latent)
        if problem is not None:
            return SettingError(names["latent"] + problem[0], problem[1])
        if not isinstance(self.rope_interleaved, bool):
            return SettingError(names["rope_interleaved"], f"={self.rope_interleaved!r} must be true or false")
        return self._rope_problem(names) or self._scaling_problem(names)

    def _scaling_problem(self, names: Mapping[str, str]) -> SettingError | None:
        """YaRN's settings (with RoPE) and the query temperature's, each a mapping its part checks; neither with
        latent attention, whose RoPE and queries are its own."""
        from andrea.attention.positions.temperature import temperature_problem
        from andrea.attention.positions.yarn import yarn_problem

        for key, value, problem_of in (("rope_yarn", self.rope_yarn, yarn_problem),
                                       ("temperature", self.temperature, temperature_problem)):  # fmt: skip
            if value is None:
                continue
            if key == "rope_yarn" and self.position != "rope":
                return SettingError(names[key], f"stretches RoPE, and the position is {self.position}; drop it")
            if self.latent is not None:
                return SettingError(names[key], "with heads=mla: latent attention's queries and RoPE are its own")
            problem = problem_of(value)
            if problem:
                inner = re.match(r"\.(\w+) ?(.*)", problem)  # ".factor=0 must be ...": the key under it
                if inner:
                    return SettingError(f"{names[key]}.{inner[1]}", inner[2])
                return SettingError(names[key], problem)
        return None

    def _rope_problem(self, names: Mapping[str, str]) -> SettingError | None:
        """RoPE's base a positive number, and its fraction one that turns an even count of a head's channels
        (latent attention turns its own decoupled key, heads.latent.rope_dim, instead)."""
        from andrea.attention.positions.rope import fraction_problem

        base = self.rope_base
        if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 1:
            return SettingError(names["rope_base"], f"={base!r} must be a number above 1 (RoPE's base, e.g. 10000)")
        if self.position != "rope" or self.rope_fraction == 1:
            return None
        if self.latent is not None:
            return SettingError(
                names["rope_fraction"], f"={self.rope_fraction} with heads=mla: latent attention turns its own "
                "decoupled key (heads.latent.rope_dim); drop the fraction",
            )  # fmt: skip
        problem = fraction_problem(self.width, self.rope_fraction)
        return None if problem is None else SettingError(names["rope_fraction"], problem)
