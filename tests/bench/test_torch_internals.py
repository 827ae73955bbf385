"""The private torch API andrea uses (andrea/bench/torch_internals.py) is still there: an upgrade that moves
it fails here, by name, not as a wrong memory figure in a benchmark table."""

import torch
from torch.profiler import ProfilerActivity, profile

from andrea.bench import torch_internals


def test_the_version_it_was_checked_with_is_the_one_installed():
    installed = torch.__version__.split("+")[0]
    assert installed == torch_internals.CHECKED_WITH, (
        f"torch {installed} is installed, andrea's internals were checked with {torch_internals.CHECKED_WITH}: "
        "re-check andrea/bench/torch_internals.py, then update CHECKED_WITH"
    )


def test_allocations_reads_each_allocation_and_its_free():
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(1 << 20, dtype=torch.uint8)
        del x
    sizes = [size for _, size in torch_internals.allocations(prof, "cpu")]
    assert 1 << 20 in sizes and -(1 << 20) in sizes
    assert sizes.index(1 << 20) < sizes.index(-(1 << 20))


def test_raise_recompile_limit_only_raises_it():
    import torch._dynamo.config

    with torch._dynamo.config.patch(recompile_limit=8):  # put back after (monkeypatch would delete the option)
        torch_internals.raise_recompile_limit(24)
        assert torch._dynamo.config.recompile_limit == 24
        torch_internals.raise_recompile_limit(4)
        assert torch._dynamo.config.recompile_limit == 24
    assert torch._dynamo.config.recompile_limit != 24
