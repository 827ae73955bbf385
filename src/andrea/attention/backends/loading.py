"""Where triton's kernels come from: flash_kernels compiled for a GPU, or the same source under Triton's
interpreter for CPU tensors (TRITON_INTERPRET=1, read per call; the tests' way to run the kernels on a CPU)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from types import ModuleType

INTERPRETER = "TRITON_INTERPRET"  # =1: CPU tensors run the kernels under Triton's interpreter


def interpreter_on() -> bool:
    """Whether CPU tensors may run the kernels under Triton's interpreter now (the variable is read per call)."""
    return os.environ.get(INTERPRETER) == "1"


def _language_interpreted() -> bool:
    """Whether Triton's own library functions (tl.zeros, tl.sum, ...) were defined for the interpreter: Triton
    decides that once, when it is first imported, from the same variable."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.zeros, InterpretedFunction)


PACKAGE = "andrea.attention.backends"


@functools.cache
def kernels(interpreted: bool) -> ModuleType:
    """flash_kernels compiled for a GPU, or the same source under Triton's interpreter (for CPU tensors):
    Triton decides between the two when a module's kernels are defined, so the interpreted kernels are module
    objects of their own, each part (flash_kernels.PARTS) defined anew under the interpreter and seen by the
    parts after it, without replacing the compiled parts anyone else imported."""
    compiled = importlib.import_module(f"{PACKAGE}.flash_kernels")
    if not interpreted:
        return compiled
    names = [f"{PACKAGE}.{part}" for part in compiled.PARTS] + [compiled.__name__]
    saved, before = {name: sys.modules[name] for name in names}, os.environ.get(INTERPRETER)
    os.environ[INTERPRETER] = "1"
    try:
        for name in names:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.loader is not None
            sys.modules[name] = module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        return module
    finally:
        sys.modules.update(saved)  # the compiled parts, all imported by flash_kernels above
        if before is None:
            del os.environ[INTERPRETER]
        else:
            os.environ[INTERPRETER] = before
