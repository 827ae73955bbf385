"""What every family's parity test checks (tests/models/test_olmo3.py, test_gemma3.py, ...): transformers' model
with random weights (norm gains too, away from their start), saved as a user downloads one; then the logits, each
layer's output and input gradient, every parameter's gradient of one loss (transformers' mapped by andrea's
loader's own map) and greedy tokens decoded from each side's cache, compared. A family whose layers hold experts
andrea does not build (gpt-oss) compares each layer's attention instead: its output and input gradient, and its
outputs step by step as transformers decodes from its cache."""

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


ATTENTION = ("self_attn", "attention")  # a layer's attention: transformers' module in a layer, andrea's in a block


def layer_errors(
    net: nn.Module, hf: nn.Module, vocab: int, part: tuple[str, str] | None = None
) -> list[tuple[float, float]]:
    """Layer by layer, on the hidden states transformers' own forward hands each decoder layer (with the mask and
    the positions it hands it): (the output's, the input gradient's) relative error of andrea's block against
    transformers' layer, the gradient that of one random projection of the output. `part` (theirs, ours): that
    module of each layer instead (ATTENTION)."""
    ids = torch.randint(0, vocab, (2, 20), generator=torch.Generator().manual_seed(7))
    theirs_at, ours_at = (f".{name}" for name in part) if part else ("", "")
    calls: list[tuple[nn.Module, tuple, dict]] = []
    layers = [layer.get_submodule(theirs_at[1:]) for layer in hf.get_submodule("model.layers").children()]
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
        ours = _output_and_gradient(net.get_submodule(f"blocks.{i}{ours_at}"), x, probe)
        errors.append((relative(ours[0], theirs[0]), relative(ours[1], theirs[1])))
    return errors


def cached_attention_errors(net: nn.Module, hf: nn.Module, vocab: int, steps: int = 12) -> list[float]:
    """Each layer's attention as transformers decodes greedily from its cache (the prompt, then one token a step):
    the worst relative error, over the steps, of andrea's attention fed the same inputs one call at a time with
    its own cache."""
    prompt = torch.randint(0, vocab, (1, 5), generator=torch.Generator().manual_seed(4))
    calls: list[list[tuple[Tensor, Tensor]]] = [[] for _ in hf.get_submodule("model.layers").children()]
    hooks = [
        layer.get_submodule("self_attn").register_forward_hook(
            lambda m, a, k, out, i=i: calls[i].append(((a[0] if a else k["hidden_states"]).detach(), out[0].detach())),
            with_kwargs=True,
        )
        for i, layer in enumerate(hf.get_submodule("model.layers").children())
    ]
    hf.generate(prompt, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, pad_token_id=0)  # type: ignore[operator]
    for hook in hooks:
        hook.remove()
    caches, errors = net.new_cache(), []  # type: ignore[operator]
    with torch.no_grad():
        for i, layer_calls in enumerate(calls):
            assert len(layer_calls) == steps  # the prompt, then a call a new token (the last token is not fed)
            attention = net.get_submodule(f"blocks.{i}.attention")
            errors.append(max(relative(attention(x, cache=caches[i])[0], y) for x, y in layer_calls))
    return errors


def _output_and_gradient(layer: Callable[[Tensor], Any], x: Tensor, probe: Tensor) -> tuple[Tensor, Tensor]:
    """A layer's output at x (its first, where it returns several), and the gradient at x of <output, probe>."""
    h = x.clone().requires_grad_()
    out = layer(h)
    out = out[0] if isinstance(out, tuple) else out
    (out * probe).sum().backward()
    assert h.grad is not None
    return out.detach(), h.grad


def preset_trained(tmp_path: Path, preset: str) -> tuple[Any, bool]:
    """`model=<preset>` trained 5 steps from the config, and whether greedy tokens from its checkpoint's caches are
    those recomputing every step gives: (the run's result, alike)."""
    from andrea.models.files.load import load_any
    from andrea.train.pipeline import train
    from tests.compose import QUICK, compose_train

    overrides = [*QUICK, f"model={preset}", "data.num_train=320", "trainer.max_steps=5", "validate=false"]
    result = train(compose_train(tmp_path, overrides))
    module = load_any(tmp_path / "checkpoints" / "last.ckpt", "cpu")[0]
    prompt = torch.tensor([[1, 2, 3]])
    cached, recomputed = (generate(module, prompt, 24, top_k=1, use_cache=use) for use in (True, False))
    return result, torch.equal(cached, recomputed)
