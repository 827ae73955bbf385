"""What every family's parity test checks (tests/models/test_olmo3.py, test_gemma3.py): transformers' model with
random weights (norm gains too, away from their start), saved as a user downloads one; then the logits, each
layer's output and input gradient, every parameter's gradient of one loss (transformers' mapped by andrea's
loader's own map) and greedy tokens decoded from each side's cache, compared."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from andrea.models.generate import generate


def relative(got: Tensor, want: Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


def saved(model: nn.Module, folder: Path) -> nn.Module:
    """`model` (transformers', seeded by the caller) with every 1-D parameter moved off its start, saved."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.eval().save_pretrained(folder)  # type: ignore[operator]
    return model


def logits_error(net: nn.Module, hf: nn.Module, vocab: int) -> float:
    ids = torch.randint(0, vocab, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return relative(net(ids)[0], hf(ids).logits)


def worst_gradient(
    net: nn.Module, hf: nn.Module, vocab: int, mapped: Callable[[dict[str, Tensor]], dict[str, Tensor]]
) -> tuple[str, float]:
    """The parameter whose gradient differs most (relative), and by how much, after one loss backward."""
    ids = torch.randint(0, vocab, (2, 20), generator=torch.Generator().manual_seed(2))
    targets = torch.randint(0, vocab, (2, 20), generator=torch.Generator().manual_seed(3))
    for model, logits in ((net, lambda: net(ids)[0]), (hf, lambda: hf(ids).logits)):
        model.zero_grad()
        torch.nn.functional.cross_entropy(logits().flatten(0, 1), targets.flatten()).backward()
    theirs = mapped({name: p.grad for name, p in hf.named_parameters() if p.grad is not None})
    ours = {name: p.grad for name, p in net.named_parameters() if p.grad is not None}
    assert set(ours) <= set(theirs), set(ours) - set(theirs)  # theirs also names a tied head, as the loader does
    errors = {name: relative(ours[name], theirs[name]) for name in ours}
    worst = max(errors, key=errors.__getitem__)
    return worst, errors[worst]


def decoded_alike(net: nn.Module, hf: nn.Module, vocab: int, steps: int = 12) -> bool:
    """Greedy tokens, one at a time from each side's cache, the same."""
    prompt = torch.randint(0, vocab, (1, 5), generator=torch.Generator().manual_seed(4))
    ours = generate(net, prompt, steps, top_k=1)
    theirs = hf.generate(prompt, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, pad_token_id=0)  # type: ignore[operator]
    return torch.equal(ours, theirs)


def layer_errors(net: nn.Module, hf: nn.Module, vocab: int) -> list[tuple[float, float]]:
    """Layer by layer, on the hidden states transformers' own forward hands each decoder layer (with the mask and
    the positions it hands it): (the output's, the input gradient's) relative error of andrea's block against
    transformers' layer, the gradient that of one random projection of the output."""
    ids = torch.randint(0, vocab, (2, 20), generator=torch.Generator().manual_seed(7))
    calls: list[tuple[nn.Module, tuple, dict]] = []
    layers = list(hf.get_submodule("model.layers").children())
    hooks = [layer.register_forward_pre_hook(lambda m, a, k: calls.append((m, a, dict(k))), with_kwargs=True)
             for layer in layers]  # fmt: skip
    with torch.no_grad():
        hf(ids, use_cache=False)
    for hook in hooks:
        hook.remove()
    errors = []
    for i, (layer, args, kwargs) in enumerate(calls):
        x = (args[0] if args else kwargs.pop("hidden_states")).detach()
        probe = torch.randn(x.shape, generator=torch.Generator().manual_seed(i))
        theirs = _output_and_gradient(partial(layer, **kwargs), x, probe)
        ours = _output_and_gradient(net.get_submodule(f"blocks.{i}"), x, probe)
        errors.append((relative(ours[0], theirs[0]), relative(ours[1], theirs[1])))
    return errors


def _output_and_gradient(layer: Callable[[Tensor], Any], x: Tensor, probe: Tensor) -> tuple[Tensor, Tensor]:
    """A layer's output at x (its first, where it returns several), and the gradient at x of <output, probe>."""
    h = x.clone().requires_grad_()
    out = layer(h)
    out = out[0] if isinstance(out, tuple) else out
    (out * probe).sum().backward()
    assert h.grad is not None
    return out.detach(), h.grad
