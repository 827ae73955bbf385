"""Attention sinks (Xiao et al. 2023, StreamingLLM): a model streamed past its context with a cache of the recent
window only loses its footing once the first tokens are evicted; keeping the first 4 beside the window recovers
it; and a model pre-trained with a learnable sink token at the start of every sample needs only that one token
kept (their §3.3). Measured first: whether the small model grew a sink at all (its weight on the first token).

Two models, as §3.3 trains them: `data.bos=true` starts every training window with the same token (the
end-of-text id, as GPT-2 and Llama see a BOS first): a learnable sink token, its embedding trained at position 0
of every sample; `data.bos=false` (vanilla) starts its windows anywhere in the text. Once trained, on 4 streams of
held-out text 8 times the training context, each begun as the model's training windows begin: the loss of each
next token with the cache keeping the window only, with the first 1 and the first 4 kept beside a window as much
shorter (the same cache), and recomputing each token's last max_context tokens (the reference; the BOS and the
last max_context - 1 for the model trained with one); and the first token's share of the attention at the late
queries of a context-long window. One seed of each model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.models.network import Network
from andrea.models.streaming import streaming_losses, unstreamable
from andrea.train.studies import figure
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, net_of, resting_on

STREAMS, LENGTH = 4, 8  # streams of held-out text, each LENGTH x max_context tokens
KEEP = 4  # the first tokens StreamingLLM keeps
SINK = 3.0  # the first token's weight at least this many times a uniform share: a sink
HURTS = 1.1  # perplexity without the first tokens at least this many times with them
RECOVERS = 1.05  # with the first tokens kept, perplexity at most this many times the reference
KEPT = {"window": 0, "first_1": 1, f"first_{KEEP}": KEEP}  # the caches streamed: the first tokens each keeps


@dataclass
class Sinks(Study):
    name = "sinks"
    title = "Attention sinks and streaming (Xiao et al. 2023, StreamingLLM)"
    tasks = ("text",)

    def refuses(self, net: Network) -> str | None:
        problem = unstreamable(net)
        return None if problem is None else f"the study streams each run's model past its context, and its {problem}"

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        net = net_of(module)
        C = net.max_context
        ids = data.streams(STREAMS, LENGTH * C)
        curves = {"recomputed": streaming_losses(net, ids, None, int(data.bos))}  # with its BOS, as it trained
        curves |= {name: streaming_losses(net, ids, C - kept, kept) for name, kept in KEPT.items()}
        return {
            "context": C,
            "curves": {name: losses.mean(dim=0).tolist() for name, losses in curves.items()},
            "first_token": first_token_share(net, ids[:, :C]),
        }

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        """Each claim rests on what makes it mean something: eviction can hurt only where a sink grew, and one kept
        sink token can stand for the first 4 only where evicting it hurt; each is inconclusive where that failed."""
        runs = {"sink token" if job.setting("data.bos") else "vanilla": job for job in jobs}
        _plot(runs, figure)
        model = runs.get("sink token")
        sink = _sink(model)
        hurt = None if model is None else _hurt(model)
        return [sink, resting_on(_evict(model), sink), resting_on(_one_token(model, runs.get("vanilla")), hurt)]


def first_token_share(net: Any, ids: torch.Tensor) -> float:
    """The first token's weight at the queries of the window's second half, against a uniform share there
    (1 / (i + 1)): the mean over every layer after the first and every head of weight / uniform."""
    _, weights = net(ids, return_weights=True)
    T = ids.shape[1]
    late = torch.arange(T // 2, T)
    ratios = [w[:, :, late, 0].float().mean(dim=(0, 1)) * (late + 1) for w in weights[1:] or weights]
    return float(torch.stack(ratios).mean())


def after_context(job: Job, name: str) -> float:
    """The perplexity of the tokens past the first max_context of each stream (where eviction has begun)."""
    losses = job.final["curves"][name][job.final["context"] :]
    return math.exp(sum(losses) / len(losses))


def _sink(job: Job | None) -> Claim:
    claim = "a model that sees the same first token in every sample grows an attention sink on it"
    paper = "Xiao et al. Fig. 2 (Llama-2-7B, BOS first): past the first two layers, most heads put most weight on it"
    if job is None:
        return Claim(claim, paper, "the data.bos=true run did not complete", UNSURE)
    share = job.final["first_token"]
    ours = f"later layers' weight on the first token: {share:.1f}x a uniform share"
    return Claim(claim, paper, ours, HOLDS if share >= SINK else FAILS)


def _evict(job: Job | None) -> Claim:
    claim = f"evicting the first tokens hurts; keeping the first {KEEP} recovers"
    paper = "Xiao et al. Table 1 (Llama-2-13B, a cache of 1,024, PG-19): window only 5158.07, the first 4 kept 5.40"
    if job is None:
        return Claim(claim, paper, "the data.bos=true run did not complete", UNSURE)
    window, kept, exact = (after_context(job, n) for n in ("window", f"first_{KEEP}", "recomputed"))
    ours = (
        f"perplexity past the context: window only {window:.2f}, first {KEEP} kept {kept:.2f}, recomputed {exact:.2f}"
    )
    return Claim(claim, paper, ours, HOLDS if window >= HURTS * kept and kept <= RECOVERS * exact else FAILS)


def _hurt(job: Job) -> Claim:
    """The precondition of the sink token's claim: evicting it hurt the model trained with it."""
    window, one = after_context(job, "window"), after_context(job, "first_1")
    return Claim(
        "evicting the sink token hurts the model trained with it", "", f"window only {window:.2f}, the sink token "
        f"kept {one:.2f}", HOLDS if window >= HURTS * one else FAILS,
    )  # fmt: skip


def _one_token(job: Job | None, vanilla: Job | None) -> Claim:
    claim = f"trained with a sink token, keeping that one token streams as well as keeping the first {KEEP}"
    paper = "Xiao et al. Table 3 (160M, from scratch): the sink token alone kept 18.01; vanilla 18.49 (1), 18.05 (2)"
    if job is None:
        return Claim(claim, paper, "the data.bos=true run did not complete", UNSURE)
    one, four = after_context(job, "first_1"), after_context(job, f"first_{KEEP}")
    ours = f"perplexity past the context, sink token: 1 kept {one:.2f}, {KEEP} kept {four:.2f}"
    if vanilla is not None:
        ours += f"; vanilla: {after_context(vanilla, 'first_1'):.2f} and {after_context(vanilla, f'first_{KEEP}'):.2f}"
    return Claim(claim, paper, ours, HOLDS if one <= RECOVERS * four else FAILS)


def _plot(runs: dict[str, Job], path: Path) -> None:
    """Xiao et al.'s Fig. 3 for each model: the perplexity of the recent tokens as the stream goes on, by cache."""
    fig, axes = figure.panels(max(1, len(runs)), 6.5 * max(1, len(runs)), 4)
    names = {"recomputed": "recomputed window", "window": "window only", "first_1": "first token + window"}
    names[f"first_{KEEP}"] = f"first {KEEP} + window"
    colours = {"recomputed": "black", "window": "tab:red", "first_1": "tab:orange", f"first_{KEEP}": "tab:green"}
    for ax, (model, job) in zip(axes, sorted(runs.items(), reverse=True), strict=False):
        curves, C = job.final["curves"], job.final["context"]
        span = max(1, C // 4)
        for name, label in names.items():
            local = torch.tensor(curves[name]).unfold(0, span, 1).mean(dim=-1).exp()  # over the last `span` tokens
            ax.plot(range(span, span + len(local)), local, color=colours[name], label=label)
        ax.axvline(C, color="grey", linestyle=":", label="training context")
        ax.set(title=f"{model} (data.bos={model == 'sink token'}): first token {job.final['first_token']:.1f}x uniform")
        ax.set(xlabel="tokens streamed", ylabel=f"perplexity of the last {span} tokens")
    figure.save(fig, path)
