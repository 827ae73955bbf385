"""The backends a refusal advises instead: those registered that run here and accept what the refused call
needed, and, while a call is checked (`requested`), the rest of that call too (its mask, its mechanism's kernel,
its score bias), so that no advice names a backend that would refuse the same call for another reason."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from andrea.attention.contract import Capabilities
    from andrea.attention.masks import Mask
    from andrea.attention.mechanisms import Mechanism
    from andrea.attention.positions import ScoreMod


@dataclass(frozen=True)
class _Request:
    """What the call being checked asks of a backend: the mask's kinds, the mechanism's kernel, a score bias."""

    mask_kinds: frozenset[str] | None
    kernel: str | None
    score_mod: bool

    def served_by(self, caps: Capabilities) -> bool:
        masks = self.mask_kinds is None or caps.mask_kinds is None or self.mask_kinds <= caps.mask_kinds
        kernel = self.kernel is None or caps.kernels is None or self.kernel in caps.kernels
        return masks and kernel and (caps.score_mod or not self.score_mod)


_REQUEST: ContextVar[_Request | None] = ContextVar("andrea_attention_request", default=None)


@contextmanager
def requested(
    mask: Mask | None, mechanism: Mechanism | type[Mechanism] | None, score_mod: ScoreMod | None
) -> Iterator[None]:
    """While a call is checked: the backends a refusal advises must run its mask, mechanism and score bias too."""
    kinds = None if mask is None else frozenset(mask.kinds)
    token = _REQUEST.set(_Request(kinds, None if mechanism is None else mechanism.kernel, score_mod is not None))
    try:
        yield
    finally:
        _REQUEST.reset(token)


def _alternatives(accepts: Callable[[Capabilities], bool]) -> str:
    """The registered backends that can run here and whose capabilities satisfy `accepts` (and run the rest of the
    call being checked, `requested`), for error messages."""
    from andrea.attention.registry import backend_registry

    request = _REQUEST.get()
    capabilities = {name: backend_registry.load(name).capabilities for name in backend_registry.names()}
    names = [
        name
        for name, caps in capabilities.items()
        if caps.unavailable is None and accepts(caps) and (request is None or request.served_by(caps))
    ]
    return "attention backend " + " / ".join(names) if names else "another attention backend"
