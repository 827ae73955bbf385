"""Every use andrea makes of torch's private API, in one place.

Checked against torch 2.13.0 (tests/bench/test_torch_internals.py fails loudly when an upgrade moves it).
Nothing else in andrea reaches past torch's public API.

    allocations(prof, device_type)    (time in ns, bytes) of every allocation (> 0) and free (< 0)
                                      a finished torch.profiler run recorded on that device type
    raise_recompile_limit(n)          let torch.compile keep n compiled versions of one function (its
                                      default, 8, is too few for one benchmark over several shapes)
"""

from __future__ import annotations

from torch._C._profiler import _EventType, _ExtraFields_Allocation
from torch.profiler import profile

CHECKED_WITH = "2.13.0"


def raise_recompile_limit(limit: int) -> None:
    import torch._dynamo.config

    torch._dynamo.config.recompile_limit = max(limit, torch._dynamo.config.recompile_limit)


def allocations(prof: profile, device_type: str) -> list[tuple[int, int]]:
    """(start time in ns, size in bytes; negative for a free) of each allocator event, in time order."""
    assert prof.profiler is not None and prof.profiler.kineto_results is not None  # the profile has run
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        fields = event.extra_fields
        allocation = event.tag == _EventType.Allocation
        if allocation and isinstance(fields, _ExtraFields_Allocation) and fields.device.type == device_type:
            events.append((event.start_time_ns, fields.alloc_size))
        stack.extend(event.children)
    return sorted(events)
