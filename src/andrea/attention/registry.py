"""Registries of attention backends and mask strategies: the built-ins, plus
whatever installed packages declare under an entry-point group.

A third-party package adds a backend without touching andrea:

    [project.entry-points."andrea.attention_backends"]
    my_backend = "my_pkg.attention:MyBackend"     # a subclass of AttentionBackend

a mask strategy under "andrea.attention_masks" (a subclass of Mask), an attention mechanism under
"andrea.attention_mechanisms" (a subclass of Mechanism), and a selection of keys under "andrea.attention_selections"
(a subclass of andrea.attention.selection.Selection).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, TypeVar

from andrea.core.plugins import CONF_GROUP, PluginError, Registry, plugin_failure

if TYPE_CHECKING:
    from andrea.attention.contract import AttentionBackend
    from andrea.attention.masks import Mask
    from andrea.attention.mechanisms import Mechanism
    from andrea.attention.selection import Selection, SelectionSizes

T = TypeVar("T")
__all__ = ["PluginError", "Registry", "broken_plugins"]  # and the registries, get_* and as_* below


# the layer a plugin mechanism is built for to see that it can be, and the conformance kit's (andrea.testing)
PROBE_SIZES = dict(n_head=4, head_dim=8, d_model=32, max_context=9, layer=1, n_layer=2)


def broken_plugins() -> list[str]:
    """One line per installed plugin entry point (backend, mask, mechanism or config package) that cannot be
    loaded, or, for a mechanism, built with its default settings."""
    lines = backend_registry.broken() + mask_registry.broken()
    lines += mechanism_registry.broken(lambda name: get_mechanism(name, PROBE_SIZES))
    for entry_point in sorted(entry_points(group=CONF_GROUP), key=lambda ep: ep.name):
        try:  # a package of YAML files: found, never imported beyond its parents
            if importlib.util.find_spec(entry_point.value) is None:
                raise ModuleNotFoundError(f"no package named {entry_point.value!r}")
        except Exception as err:
            lines.append(plugin_failure(entry_point, err))
    return lines


backend_registry: Registry[AttentionBackend] = Registry(
    "attention backend",
    "andrea.attention_backends",
    {
        "naive": "andrea.attention.backends.naive:NaiveBackend",
        "eager": "andrea.attention.backends.eager:EagerBackend",
        "sdpa": "andrea.attention.backends.sdpa:SDPABackend",
        "flex": "andrea.attention.backends.flex:FlexBackend",
        "triton": "andrea.attention.backends.triton:TritonBackend",
    },
)

mask_registry: Registry[Mask] = Registry(
    "mask strategy",
    "andrea.attention_masks",
    {
        "causal": "andrea.attention.masks.causal:Causal",
        "none": "andrea.attention.masks.none:NoMask",
        "sliding_window": "andrea.attention.masks.sliding_window:SlidingWindow",
        "prefix_lm": "andrea.attention.masks.prefix_lm:PrefixLM",
        "chunked": "andrea.attention.masks.chunked:Chunked",
        "padding": "andrea.attention.masks.padding:KeyPadding",
        "document": "andrea.attention.masks.document:Document",
        "selected": "andrea.attention.masks.selected:Selected",
    },
)

mechanism_registry: Registry[Mechanism] = Registry(
    "attention mechanism",
    "andrea.attention_mechanisms",
    {
        "softmax": "andrea.attention.mechanisms.softmax:Softmax",
        "sigmoid": "andrea.attention.mechanisms.sigmoid:Sigmoid",
        "sink": "andrea.attention.mechanisms.sink:Sink",
        "gated": "andrea.attention.mechanisms.gated:Gated",
        "diff": "andrea.attention.mechanisms.diff:Diff",
        "softcap": "andrea.attention.mechanisms.softcap:Softcap",
        "qknorm": "andrea.attention.mechanisms.qknorm:QKNorm",
        "gated_qknorm": "andrea.attention.mechanisms.gated_qknorm:GatedQKNorm",
        "stickbreaking": "andrea.attention.mechanisms.stickbreaking:StickBreaking",
        "fox": "andrea.attention.mechanisms.fox:Fox",
    },
)
selection_registry: Registry[Selection] = Registry(
    "key selection",
    "andrea.attention_selections",
    {
        "dsa": "andrea.attention.selection.dsa:DSA",
        "moba": "andrea.attention.selection.moba:MoBA",
        "nsa": "andrea.attention.selection.nsa:NSA",
    },
)
NO_SELECTION = "none"  # conf/selection/none.yaml's name: every key the mask allows

# what the block gives every mechanism: its sizes, and whether its projections carry a bias
SIZES = ("n_head", "head_dim", "d_model", "max_context", "layer", "n_layer", "projection_bias")


def _construct(what: str, name: str, cls: type[T], params: dict[str, Any]) -> T:
    """cls(**params), with a wrong or missing parameter named against cls's signature."""
    signature = inspect.signature(cls).replace(return_annotation=inspect.Signature.empty)
    try:
        signature.bind(**params)
    except TypeError as err:
        raise ValueError(f"{what} '{name}' takes {signature}, got {params}: {err}") from None
    return cls(**params)


def get_backend(name: str, /, **options: Any) -> AttentionBackend:
    """An attention backend instance by registry name, e.g. get_backend("flex", compile=True)."""
    return _construct("attention backend", name, backend_registry.load(name), options)


def get_mask(name: str, /, **params: Any) -> Mask:
    """A mask strategy instance by registry name, e.g. get_mask("sliding_window", window=64)."""
    return _construct("mask", name, mask_registry.load(name), params)


def mechanism_settings(name: str) -> list[str]:
    """The settings a mechanism takes of its own (its keyword parameters beside the layer's sizes)."""
    return _keyword_settings(mechanism_registry.load(name), beside=SIZES)


def _keyword_settings(cls: type, beside: tuple[str, ...] = ()) -> list[str]:
    """A part's settings: its constructor's keyword-only parameters but those the layer gives (`beside`)."""
    params = inspect.signature(cls).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in beside]


def get_mechanism(name: str, /, sizes: Mapping[str, Any], **settings: Any) -> Mechanism:
    """One layer's mechanism by registry name: `sizes` the layer's (SIZES), `settings` the mechanism's own,
    e.g. get_mechanism("sigmoid", sizes, bias=-3.0); a setting it does not take is refused by name."""
    cls = mechanism_registry.load(name)
    unknown = sorted(set(settings) - set(mechanism_settings(name)))
    if unknown:
        takes = ", ".join(mechanism_settings(name)) or "no settings"
        raise ValueError(f"mechanism '{name}' takes {takes}; got {', '.join(f'mechanism.{k}' for k in unknown)}")
    try:
        return cls(**sizes, **settings)
    except ValueError:  # a setting refused by the mechanism itself, in its own words
        raise
    except Exception as err:  # a plugin's constructor that fails: the plugin's, named in one line
        if name in mechanism_registry.builtins:
            raise
        raise PluginError(plugin_failure(mechanism_registry.entry_point(name), err, "built")) from err


def as_mechanism(spec: str | Mapping[str, Any] | Mechanism | None, sizes: Mapping[str, Any]) -> Mechanism:
    """A layer's mechanism from what a config or a model file says: a registry name, a mapping with its
    name and settings ({"name": "sigmoid", "bias": null}, as conf/mechanism/ writes it), or None (softmax);
    or a Mechanism already built for the layer's sizes (the conformance kit's examples)."""
    from andrea.attention.mechanisms import Mechanism

    if isinstance(spec, Mechanism):
        return spec
    if spec is None:
        return get_mechanism("softmax", sizes)
    if isinstance(spec, str):
        return get_mechanism(spec, sizes)
    if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
        return get_mechanism(spec["name"], sizes, **{str(k): v for k, v in spec.items() if k != "name"})
    raise ValueError(f"mechanism={spec!r} is not a mechanism: give a registered name, or a mapping with its name")


def as_backend(spec: str | AttentionBackend, options: Mapping[str, Any] | None = None) -> AttentionBackend:
    """A backend from what a config says: a registry name with its options, or a backend already built."""
    if isinstance(spec, str):
        return get_backend(spec, **(options or {}))
    if spec is None or isinstance(spec, (Mapping, list, tuple, int, float)):  # plain values, from a config or a file
        names = ", ".join(backend_registry.names())
        raise ValueError(f"attention.backend={spec!r} must be a backend's name, one of {names}")
    return spec


def as_mask(spec: Mask | str | Mapping[str, Any] | None) -> Mask:
    """A mask from what a config or a model file says: an expression ("causal & sliding_window(window=64)"),
    a registry name with its fields ({"name": "sliding_window", "window": 64}, as conf/mask/ writes it),
    None (no mask), or a Mask already built."""
    from andrea.attention.masks import Mask, NoMask

    if spec is None:
        return NoMask()
    if isinstance(spec, str):
        return parse_mask(spec)
    if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
        return get_mask(spec["name"], **{str(k): v for k, v in spec.items() if k != "name"})
    if isinstance(spec, Mask):
        return spec
    raise ValueError(f"mask={spec!r} is not a mask: give an expression, or a mapping with a registered mask's name")


MAX_EXPRESSION = 256  # characters of a mask expression


def parse_mask(expression: str) -> Mask:
    """A mask from a small expression of registered names, `&`, `|` and parentheses:

        parse_mask("causal & (sliding_window(window=64) | prefix_lm(prefix_len=8))")

    Only names, keyword arguments with literal values and the two operators are
    accepted; nothing is evaluated as Python. An expression is at most MAX_EXPRESSION characters
    (a few terms, never a parser's recursion bomb), and its integers fit in 32 bits.
    """
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION:
        length = len(expression) if isinstance(expression, str) else type(expression).__name__
        raise ValueError(f"a mask expression is at most {MAX_EXPRESSION} characters, got {length}; combine fewer masks")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError(
            f"mask expression {expression!r} is not valid; e.g. 'causal & sliding_window(window=64)'"
        ) from None
    return _build(tree.body, expression)


def _build(node: ast.expr, expression: str) -> Mask:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        left, right = _build(node.left, expression), _build(node.right, expression)
        return left & right if isinstance(node.op, ast.BitAnd) else left | right
    if isinstance(node, ast.Name):
        return get_mask(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return get_mask(node.func.id, **_keywords(node, expression))
    raise _unreadable(node, expression)


def _keywords(call: ast.Call, expression: str) -> dict[str, Any]:
    """name(key=literal, ...)'s keywords as values; a **mapping is unreadable."""
    if any(kw.arg is None for kw in call.keywords):
        raise _unreadable(call, expression)
    return {str(kw.arg): _literal(kw.value, expression) for kw in call.keywords}


def _literal(node: ast.expr, expression: str) -> Any:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise _unreadable(node, expression) from None
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**31) <= value < 2**31:
        raise ValueError(f"mask expression {expression!r}: {value} is out of range; integers fit in 32 bits")
    return value


def _unreadable(node: ast.AST, expression: str) -> ValueError:
    return ValueError(
        f"mask expression {expression!r}: cannot read {ast.unparse(node)!r}; "
        "write names and name(key=value) with literal values, joined by & and |"
    )


def as_selection(spec: str | Mapping[str, Any] | None, sizes: SelectionSizes) -> Selection | None:
    """A layer's selection of keys from what a config or a model file says: None or `none` (every key the mask
    allows), a registry name, or a mapping with its name and settings ({"name": "dsa", "topk": 64}, as
    conf/selection/ writes it); a setting it does not take is refused by name."""
    if isinstance(spec, str):
        spec = {"name": spec}
    name = spec.get("name") if isinstance(spec, Mapping) else None
    if spec is None or name == NO_SELECTION:
        return None
    if not isinstance(spec, Mapping) or not isinstance(name, str):
        raise ValueError(f"selection={spec!r} is not a selection: give a registered name, or a mapping with its name")
    cls = selection_registry.load(name)
    return cls(sizes, **_selection_settings(name, cls, spec))


def _selection_settings(name: str, cls: type, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A selection's settings from its config node, a setting it does not take refused by name."""
    takes = _keyword_settings(cls)
    settings = {str(key): value for key, value in spec.items() if key != "name"}
    unknown = sorted(set(settings) - set(takes))
    if unknown:
        raise ValueError(f"selection '{name}' takes {', '.join(f'selection.{key}' for key in takes) or 'no settings'};"
                         f" got {', '.join(f'selection.{key}' for key in unknown)}")  # fmt: skip
    return settings
