"""The one attention contract every backend implements, and the capabilities it declares.

A caller (the block, the conformance kit, a user) calls the backend, the one way in; the backend implements
`forward`, which receives every argument as a keyword (those its signature names, or all with **kwargs):

    backend(q, k, v, mask=None, scale=None, need_weights=False, score_mod=None, mechanism=None, **kwargs)
                                                                           -> (out, weights | None)
    forward(q, k, v, *, mask, scale, need_weights, score_mod=None, mechanism=None, **kwargs)
                                                                           -> (out, weights | None)

    q         (B, H, T, d)      queries
    k, v      (B, H_kv, S, d)   keys and values; H % H_kv == 0 (MHA, GQA, MQA)
    mask      Mask | None       an index predicate (andrea.attention.masks); None = no mask
    scale     float             multiplies q·k (the caller's None becomes 1/sqrt(d) before forward)
    score_mod ScoreMod | None   an additive score bias such as ALiBi (andrea.attention.positions);
                                not None only for a backend declaring `score_mod`
    mechanism Mechanism | None  what runs between the scores and the values (andrea.attention.mechanisms);
                                None = softmax, the only one a backend sees unless it declares the kernel
    **kwargs                    arguments later versions of the contract add: a backend that does not
                                name them never receives them, so a plugin written today keeps working
    out      (B, H, T, d)
    weights  (B, H, T, S)      when need_weights=True (else None)

Grouped heads: query head h reads key/value head h // (H // H_kv), so H // H_kv consecutive query
heads share one kv head (MHA: H_kv = H; MQA: H_kv = 1). A backend that does not declare
`native_gqa` receives k and v already repeated to H heads in that order.

Alignment: the T queries are the LAST T of the S positions, query i sitting at position S - T + i
(T = S in training; T < S in a KV cache's decode step). A mask's predicate is evaluated at those
absolute positions, so a causal query i sees keys 0 .. S - T + i.

A mechanism's `kernel` is the math a backend must run: a backend declares the kernels it runs
(`kernels`; None: any mechanism's, from its dense form), and is refused the others in one line that
names the backends that run them.

A backend declares what it can do in `capabilities`; the call checks them BEFORE
any tensor work and refuses with one line that names what to use instead. What a
backend lacks but the contract can supply without changing how the output is
computed (expanding k/v for grouped heads, the attention weights) is supplied
here, never silently elsewhere. Calling the backend is the one entry point: there is no
other path to `forward`. A class that still overrides `compute` (the entry of earlier
versions) is refused when it is defined, naming `forward`.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from andrea.attention.advice import _alternatives, requested
from andrea.attention.masks import Mask
from andrea.attention.mechanisms.softmax import SOFTMAX
from andrea.attention.positions import ScoreMod
from andrea.attention.shapes import check_shapes, expand_kv

if TYPE_CHECKING:
    from andrea.attention.mechanisms import Mechanism

SOFTMAX_ONLY = frozenset({"softmax"})


class UnsupportedAttentionError(ValueError):
    """A backend was asked for something it declares it cannot do."""


@dataclass(frozen=True)
class Capabilities:
    native_weights: bool = True  # returns the attention weights itself (else a probe computes them)
    cpu_backward: bool = True  # can be trained on CPU
    native_gqa: bool = True  # takes k, v with fewer heads than q (else k, v are expanded first)
    mask_kinds: frozenset[str] | None = None  # mask strategies it accepts; None = all
    score_mod: bool = False  # takes a ScoreMod (ALiBi); its forward then accepts `score_mod=`
    cpu: bool = True  # runs on CPU tensors at all (else: GPU only)
    unavailable: str | None = None  # why it cannot run in this environment (a missing package), else None
    kernels: frozenset[str] | None = SOFTMAX_ONLY  # the mechanisms' kernels it runs; None = any, from its dense form
    distinct_value_dim: bool = False  # takes v with another head size than q and k (latent attention: heads=mla)


class AttentionBackend(ABC):
    """Base class of every backend: `forward` holds the backend's own computation."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()

    _keywords: ClassVar[frozenset[str] | None] = None  # what its forward names (None: all, through **kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "compute" in cls.__dict__:
            raise TypeError(
                f"attention backend class {cls.__qualname__} overrides compute(), which andrea no longer calls: "
                "implement forward(q, k, v, *, mask, scale, need_weights, **kwargs) instead (andrea.attention.contract)"
            )
        parameters = inspect.signature(cls.forward).parameters.values()
        keyword = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        named = frozenset(p.name for i, p in enumerate(parameters) if i > 3 and p.kind in keyword)  # past self, q, k, v
        cls._keywords = None if any(p.kind is p.VAR_KEYWORD for p in parameters) else named

    def __call__(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Mask | None = None,
        scale: float | None = None,
        need_weights: bool = False,
        score_mod: ScoreMod | None = None,
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        """Checked before any tensor work, then computed with what the contract supplies around `forward` (the
        scale, grouped heads, the probe's weights)."""
        check_shapes(q, k, v, self.capabilities.distinct_value_dim)
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        self.checked(mask, mechanism, score_mod, device=q.device, needs_grad=needs_grad, head_dim=q.shape[-1])
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        if k.shape[1] != q.shape[1] and not self.capabilities.native_gqa:
            k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
        if mechanism is not None and mechanism.kernel == "softmax":
            mechanism = None  # what runs in the backend is softmax (the mechanism wraps it in the block)
        keywords = self._named({"mask": mask, "scale": scale, "score_mod": score_mod, "mechanism": mechanism, **kwargs})
        if not need_weights or self.capabilities.native_weights:
            return self.forward(q, k, v, need_weights=need_weights, **keywords)
        out, _ = self.forward(q, k, v, need_weights=False, **keywords)
        return out, _probe(q, k, mask, scale, score_mod, mechanism)

    def _named(self, given: dict[str, Any]) -> dict[str, Any]:
        """The keywords this backend's forward names (every one, with **kwargs)."""
        return given if self._keywords is None else {k: v for k, v in given.items() if k in self._keywords}

    def checked(
        self, mask: Mask | None, mechanism: Mechanism | type[Mechanism] | None, score_mod: ScoreMod | None, **where: Any
    ) -> None:
        """`check` and `check_mechanism` for one call, a refusal advising only backends that run all of it (asked
        again under `requested` once refused: the path a call takes when it is accepted sets nothing, which
        torch.compile traces through). A mechanism's class will do where no layer is built yet: what is checked
        of it, its kernel and name, are the class's."""
        try:
            self.check(mask=mask, score_mod=score_mod, **where)
            self.check_mechanism(mechanism)
        except UnsupportedAttentionError:
            with requested(mask, mechanism, score_mod):
                self.check(mask=mask, score_mod=score_mod, **where)
                self.check_mechanism(mechanism)
            raise

    def check(
        self,
        *,
        mask: Mask | None,
        device: torch.device | str | None,
        needs_grad: bool,
        score_mod: ScoreMod | None = None,
        head_dim: int | None = None,
    ) -> None:
        """Refuse, before any tensor work, what this backend declares it cannot do. `device` None checks
        only what holds on every device (a module checks at construction, not knowing where it will run).
        A backend with a constraint of its own (a head_dim its kernel needs, ...) extends this, calling super()."""
        caps = self.capabilities
        on_cpu = device is not None and torch.device(device).type == "cpu"
        self._check_device(on_cpu)
        if mask is not None:
            self._check_mask(mask)
        if needs_grad and on_cpu and not caps.cpu_backward:
            raise UnsupportedAttentionError(
                f"attention backend '{self.name}' has no backward on CPU; train with "
                f"{_alternatives(lambda c: c.cpu_backward)}, or run it under torch.no_grad() / on a GPU"
            )
        if score_mod is not None and not caps.score_mod:
            raise UnsupportedAttentionError(
                f"attention backend '{self.name}' cannot add a score bias ({score_mod.kind}); use "
                f"{_alternatives(lambda c: c.score_mod)}, or position=rope / learned"
            )

    def _check_mask(self, mask: Mask) -> None:
        kinds = self.capabilities.mask_kinds
        if kinds is not None and not mask.kinds <= kinds:
            missing = ", ".join(sorted(mask.kinds - kinds))
            raise UnsupportedAttentionError(
                f"attention backend '{self.name}' does not accept mask kind(s) {missing}; "
                f"use {_alternatives(lambda c: c.mask_kinds is None or mask.kinds <= c.mask_kinds)}"
            )

    def _check_device(self, on_cpu: bool) -> None:
        """Whether it runs here at all, and on a CPU."""
        caps = self.capabilities
        if caps.unavailable is not None:
            raise UnsupportedAttentionError(f"attention backend '{self.name}' cannot run here: {caps.unavailable}")
        if on_cpu and not caps.cpu:
            raise UnsupportedAttentionError(
                f"attention backend '{self.name}' does not run on CPU; use "
                f"{_alternatives(lambda c: c.cpu)}, or run it on a GPU"
            )

    def serves(self, mechanism: Mechanism | type[Mechanism] | None) -> bool:
        kernels = self.capabilities.kernels
        return mechanism is None or kernels is None or mechanism.kernel in kernels

    def check_mechanism(self, mechanism: Mechanism | type[Mechanism] | None) -> None:
        """Refuse a mechanism whose kernel this backend does not run, naming the backends that do."""
        if not self.serves(mechanism):
            assert mechanism is not None
            kernel = mechanism.kernel
            raise UnsupportedAttentionError(
                f"attention backend '{self.name}' does not run mechanism '{mechanism.name}'; use "
                f"{_alternatives(lambda c: c.kernels is None or kernel in c.kernels)}, or another mechanism"
            )

    def refusal(self, **check: Any) -> str | None:
        """Why `check(**check)` refuses, or None: what a script asks before it lists a backend as runnable here."""
        try:
            self.check(**check)
        except UnsupportedAttentionError as refused:
            return str(refused)
        return None

    @abstractmethod
    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        """(B, H, T, d), (B, H_kv, S, d) x2 -> (B, H, T, d), weights (B, H, T, S) or None (module docstring).
        A backend names the keywords it reads; with **kwargs it receives every one, later ones too."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _probe(
    q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None, mechanism: Mechanism | None
) -> Tensor:
    """The weights (B, H, T, S) for a backend that does not return its own: the mechanism's, computed apart. The
    probe only shows; it never feeds the loss."""
    with torch.no_grad():
        return (mechanism or SOFTMAX).weights(q, k, mask, scale, score_mod)
