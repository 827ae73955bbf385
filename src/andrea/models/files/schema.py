"""What a model file may say about its network: plain fields, mapped onto andrea's own classes.

A checkpoint (`andrea_net_config`) or a safetensors export (metadata `andrea.model.net`)
stores the resolved `model.net` config. Reading it never hands it to `hydra.utils.instantiate`:
`parse` checks it against a fixed schema and `build` constructs the network itself.

    _target_           one of MODELS (andrea's model classes), nothing else
    vocab_size, ..., position, bias, activation    andrea.models.settings.NET's rules, as in a config
    attention          null, or n_head, n_kv_head (integers), backend (a registered backend's
                       name), backend_options (plain values), mechanism (below), mask (below)
    mechanism          null (softmax), a registered mechanism's name, or {name: a registered mechanism,
                       its settings as plain values}; files written before mechanisms have none
    mask               null, an expression of registered mask names ("causal & sliding_window(window=8)",
                       at most registry.MAX_EXPRESSION characters), or {_target_: a registered mask class, its
                       fields as plain values}

Anything else (another `_target_`, a key the schema lacks, a list where a config belongs)
is refused in one line that names the file and the key, before anything is built. The only
modules imported on a file's word are andrea's two model modules and registered masks and
backends (installed plugins).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from torch import nn

from andrea.attention.spec import CONFIG_KEYS, NETWORK, AttentionSpec
from andrea.models.files.schema_masks import mask_terms
from andrea.models.settings import NET
from andrea.utils.rules import PLAIN, POSITIVE, SettingError, problem_of

if TYPE_CHECKING:
    from andrea.mixers.layer_spec import LayerSpec

MODELS = {"andrea.models.toy.ToyModel": "andrea.models.toy:ToyModel", "andrea.models.gpt.GPT": "andrea.models.gpt:GPT"}
ATTENTION_FIELDS = AttentionSpec.settings()  # n_head, n_kv_head, backend, backend_options, mechanism, mask, latent
POSITIVE_INT = POSITIVE[0]  # the value rules of andrea.utils.rules, for a file's fields as for a config's


class ModelFileError(ValueError):
    """A model config that andrea will not build: one line naming where it came from and the key."""


@dataclass(frozen=True)
class NetSpec:
    """A checked network config: which of andrea's models, and every field its constructor takes."""

    target: str  # a key of MODELS
    fields: dict[str, Any]  # vocab_size, max_context, d_model, n_layer, ...: the file's, else the defaults
    attention: dict[str, Any] | None  # n_head, n_kv_head, backend, backend_options, mask (still plain)
    mask_terms: int  # how many masks the mask combines (each is materialised once when the model is built)
    layer: AttentionSpec | None = None  # the attention layers' spec, read from `attention` and the sizes
    layers: tuple[LayerSpec, ...] = ()  # each layer's kind, mixer and settings (andrea.mixers.layer_spec)

    @property
    def is_gpt(self) -> bool:
        return self.target == "andrea.models.gpt.GPT"

    @property
    def n_head(self) -> int:
        return self.layer.n_head if self.layer else 0

    @property
    def n_kv_head(self) -> int:
        return self.layer.kv_heads if self.layer else 0


def model_class(target: str) -> type[nn.Module]:
    module, _, cls = MODELS[target].partition(":")
    return getattr(importlib.import_module(module), cls)


def parse(config: Any, where: str, prefix: str, build_backend: bool = True) -> NetSpec:
    """Check `config` (read from `where`, its keys shown as `prefix.key`) against the schema. Without
    `build_backend` the backend's options are left to the backend itself, when a network builds it."""

    def refuse(key: str, problem: str) -> ModelFileError:
        gap = "" if problem.startswith("=") else " "
        return ModelFileError(
            f"{where}: {prefix}{key}{gap}{problem}; refused unbuilt, give a model file written by andrea"
        )

    if not isinstance(config, dict):
        raise refuse("", f"is a {type(config).__name__}, not a model config")
    target = config.get("_target_")
    if target not in MODELS:
        raise refuse("._target_", f"={target!r} is not one of andrea's models ({', '.join(sorted(MODELS))})")
    fields = _fields(config, target, refuse)
    _check_values(fields, refuse)
    attention, terms, layer = None, 0, None
    if fields.get("attention") is not None:
        attention, terms, layer = _parse_attention(fields, refuse, prefix, build_backend)
    layers, named_terms = _check_mixers(fields, target, refuse, prefix, build_backend)
    _check_attention_present(attention, layers, refuse)
    return NetSpec(target, fields, attention, terms + named_terms, layer, layers)


def _check_attention_present(
    attention: dict | None, layers: tuple[LayerSpec, ...], refuse: Callable[[str, str], ModelFileError]
) -> None:
    """A network whose layers have attention keeps its attention settings (one without, none)."""
    if attention is None and any(spec.has_attention for spec in layers):
        raise refuse(".attention", "is missing, and the network's layers have attention")


def _fields(config: dict, target: str, refuse: Callable[[str, str], ModelFileError]) -> dict[str, Any]:
    """Every setting of the model's constructor: its defaults, then the file's own values."""
    parameters = inspect.signature(model_class(target)).parameters
    fields = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
    for key, value in config.items():
        if key in ("_target_", "_convert_"):
            continue
        if key not in parameters:
            raise refuse(f".{key}", f"is not a setting of {target.rsplit('.', 1)[-1]}")
        fields[key] = value
    for key in ("vocab_size", "max_context"):
        if key not in fields:
            raise refuse(f".{key}", "is missing")
    return fields


def _check_values(fields: dict[str, Any], refuse: Callable[[str, str], ModelFileError]) -> None:
    """The value of each plain setting (andrea.models.settings.NET): sizes, dropout, bias, activation, position."""
    problem = problem_of(NET, fields, ".")
    if problem:
        raise refuse(problem.key, problem.problem)


def _check_mixers(
    fields: dict[str, Any],
    target: str,
    refuse: Callable[[str, str], ModelFileError],
    prefix: str,
    build_backend: bool,
) -> tuple[tuple[LayerSpec, ...], int]:
    """Each layer's kind and mixer (andrea.mixers.layer_spec): a registered mixer's name with plain settings,
    named kinds of plain values (an attention kind's mask, mechanism and backend read as the network's are), and
    a layout of their names dividing n_layer. Returns each layer's spec (none for the toy model without
    attention), and the masks the named attention kinds combine."""
    mixer, kinds = fields.get("mixer"), fields.get("kinds") or {}
    _check_plain(mixer, kinds, refuse)
    if fields.get("attention") is None and not target.endswith(".GPT"):
        return (), 0  # the toy model's ablation: no layers
    layers = _layers(fields, refuse, prefix)
    named = {layer.kind: layer.settings for layer in layers if layer.attention and layer.kind in kinds}
    return layers, _check_attention_kinds(named, kinds, refuse, build_backend)


def _layers(fields: dict[str, Any], refuse: Callable[[str, str], ModelFileError], prefix: str) -> tuple[LayerSpec, ...]:
    """Each layer's spec, resolved as the network resolves it; a refusal keyed under the file's prefix."""
    from andrea.mixers.layer_spec import resolve_layers

    attention = {**(fields.get("attention") or {}), "position": fields.get("position")}
    sizes = {key: fields[key] for key in NETWORK if key in fields}
    mixer, kinds = fields.get("mixer"), fields.get("kinds") or {}
    try:
        return resolve_layers(fields.get("layout"), fields["n_layer"], mixer, kinds, attention, sizes, f"{prefix}.")
    except SettingError as err:  # a kind's or the layout's key carries the prefix; a mixer setting's is "mixer.<key>"
        key = err.key.removeprefix(prefix) if err.key.startswith(f"{prefix}.") else f".{err.key}"
        raise refuse(key, err.problem) from None


def _check_plain(mixer: object, kinds: object, refuse: Callable[[str, str], ModelFileError]) -> None:
    if mixer is not None and not (isinstance(mixer, dict) and all(isinstance(v, PLAIN) for v in mixer.values())):
        raise refuse(".mixer", "must be a mapping of a mixer's name and its settings as plain values")
    if not (isinstance(kinds, dict) and _plain(kinds)):
        raise refuse(".kinds", "must map kind names to their mixer and settings, as plain values")


def _check_attention_kinds(
    named: dict[str, Any], kinds: dict[str, Any], refuse: Callable[[str, str], ModelFileError], build_backend: bool
) -> int:
    """Each named attention kind's backend, mechanism and mask, read as the network's are (`named`: each kind's
    resolved settings). Returns the masks they combine."""
    terms = 0
    for name, settings in sorted(named.items()):
        kind_refuse = partial(_in_kind, refuse, f".kinds.{name}.")
        _check_backend(dict(settings), kind_refuse, build_backend)
        _check_mechanism(kinds[name].get("mechanism"), kind_refuse)
        terms += mask_terms(kinds[name].get("mask"), kind_refuse) if "mask" in kinds[name] else 0
    return terms


def _plain(value: object) -> bool:
    """Plain values, in mappings of plain values, to any depth."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    return isinstance(value, PLAIN)


def _in_kind(refuse: Callable[[str, str], ModelFileError], where: str, key: str, problem: str) -> ModelFileError:
    """A refusal of the network's attention settings (`.attention.<key>`), said of a named kind's."""
    return refuse(key.replace(".attention.", where, 1), problem)


def _parse_attention(
    fields: dict[str, Any], refuse: Callable[[str, str], ModelFileError], prefix: str, build_backend: bool
) -> tuple[dict, int, AttentionSpec]:
    """The file's attention read into an AttentionSpec with the network's sizes, and checked by it."""
    attention = fields["attention"]
    if not isinstance(attention, dict):
        raise refuse(".attention", f"is a {type(attention).__name__}, not a mapping")
    for key in attention:
        if key not in ATTENTION_FIELDS:
            raise refuse(f".attention.{key}", f"is not an attention setting ({', '.join(ATTENTION_FIELDS)})")
    names = {name: f"{prefix}.{name if name in NETWORK else f'attention.{name}'}" for name in CONFIG_KEYS}
    try:
        sizes = {key: fields[key] for key in NETWORK if key in fields}
        layer = AttentionSpec.read({**attention, **sizes}, names).checked(names)
    except SettingError as err:
        raise refuse(err.key.removeprefix(prefix), err.problem) from None
    _check_backend(attention, refuse, build_backend)
    _check_mechanism(attention.get("mechanism"), refuse)
    return attention, mask_terms(attention.get("mask"), refuse), layer


def _check_backend(attention: dict, refuse: Callable[[str, str], ModelFileError], build_backend: bool) -> None:
    """A registered backend's plain options, each checked by the backend itself (nothing run)."""
    from andrea.attention import get_backend

    backend = attention.get("backend", AttentionSpec.backend)
    options = attention.get("backend_options") or {}
    if not isinstance(options, dict) or not all(isinstance(v, PLAIN) for v in options.values()):
        raise refuse(".attention.backend_options", "must map option names to plain values")
    try:
        if build_backend:
            get_backend(backend, **options)
    except ValueError as err:
        raise refuse(
            ".attention.backend_options", f"are not options of {backend} ({str(err).splitlines()[0]})"
        ) from None


def _check_mechanism(mechanism: Any, refuse: Callable[[str, str], ModelFileError]) -> None:
    """A registered mechanism's name, with plain settings it takes (each checked by the mechanism when the
    network builds it)."""
    from andrea.attention.registry import mechanism_registry, mechanism_settings

    if mechanism is None:
        return
    name = mechanism.get("name") if isinstance(mechanism, dict) else mechanism
    if not isinstance(name, str) or name not in mechanism_registry.names():
        registered = ", ".join(mechanism_registry.names())
        raise refuse(".attention.mechanism", f"={mechanism!r} is not a registered mechanism ({registered})")
    if not isinstance(mechanism, dict):
        return
    for key, value in mechanism.items():
        if key != "name" and key not in mechanism_settings(name):
            raise refuse(f".attention.mechanism.{key}", f"is not a setting of mechanism {name}")
        if not isinstance(value, PLAIN):
            raise refuse(f".attention.mechanism.{key}", f"is a {type(value).__name__}, not a plain value")


def tokenizer_name(name: object, where: str, key: str) -> str | None:
    """The tokenizer a file names: one of andrea's, or None (token ids)."""
    from andrea.data.tokenizers import TOKENIZERS

    if name is None:
        return None
    if not isinstance(name, str) or name not in TOKENIZERS:
        raise ModelFileError(f"{where}: {key}={name!r} is not one of andrea's tokenizers ({', '.join(TOKENIZERS)})")
    return name
