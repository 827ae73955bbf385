"""Attention sinks (Xiao et al. 2023, StreamingLLM): a model streamed past its context with a cache of the recent
window only loses its footing once the first tokens are evicted; keeping the first 4 beside the window recovers
it. Measured first: whether the small model grew a sink at all (its weight on the first token).

Once trained, on 4 streams of held-out text 8 times the training context: the loss of each next token with
the cache keeping the window only (keep_first 0), with the first 4 kept beside a window 4 shorter (the same
cache), and recomputing each token's last max_context tokens (exact, the reference); and the first token's share
of the attention at the late queries of a context-long window. `mechanism=sink` trains a sink logit into every
softmax (gpt-oss): the claim that the first tokens matter becomes a claim about that logit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from andrea.models.network import Network
from andrea.models.streaming import streaming_losses, unstreamable
from andrea.train.studies.base import FAILS, HOLDS, UNSURE, Claim, Job, Study, net_of, resting_on

STREAMS, LENGTH = 4, 8  # streams of held-out text, each LENGTH x max_context tokens
KEEP = 4  # the first tokens StreamingLLM keeps
SINK = 3.0  # the first token's weight at least this many times a uniform share: a sink
HURTS = 1.1  # perplexity without the first tokens at least this many times with them
RECOVERS = 1.05  # with the first 4 kept, perplexity at most this many times the recomputed reference


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
        tokens = torch.as_tensor(data.val_set.tokens[: STREAMS * LENGTH * C].astype("int64"))
        ids = tokens.view(STREAMS, LENGTH * C)
        curves = {
            "recomputed": streaming_losses(net, ids, None),
            "window": streaming_losses(net, ids, C),
            "first_4": streaming_losses(net, ids, C - KEEP, KEEP),
        }
        return {
            "context": C,
            "curves": {name: losses.mean(dim=0).tolist() for name, losses in curves.items()},
            "first_token": first_token_share(net, ids[:, :C]),
        }

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        """Each claim rests on the one before it: eviction can hurt only where a sink grew, and a sink logit can
        take the hurt away only where eviction hurt the softmax model; each is inconclusive where that failed."""
        runs = {str(job.setting("mechanism.name", "softmax")): job for job in jobs}
        _plot(runs, figure)
        softmax = runs.get("softmax")
        sink, evict = _sink(softmax), _evict(softmax)
        hurt = None if softmax is None else _hurt(softmax)
        return [sink, resting_on(evict, sink), resting_on(_sink_logit(runs.get("sink")), hurt)]


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
    claim = "the model grows an attention sink: its later layers weigh the first token far above a uniform share"
    paper = "Xiao et al. Fig. 2: past the first two layers, most heads put most of their weight on the first token"
    if job is None:
        return Claim(claim, paper, "the softmax run did not complete", UNSURE)
    share = job.final["first_token"]
    return Claim(claim, paper, f"first token's weight {share:.1f}x a uniform share", HOLDS if share >= SINK else FAILS)


def _evict(job: Job | None) -> Claim:
    claim = f"evicting the first tokens hurts; keeping the first {KEEP} recovers"
    paper = "Xiao et al. Fig. 3: window attention's perplexity explodes once the first tokens go; StreamingLLM's stays"
    if job is None:
        return Claim(claim, paper, "the softmax run did not complete", UNSURE)
    window, kept, exact = (after_context(job, n) for n in ("window", "first_4", "recomputed"))
    ours = (
        f"perplexity past the context: window only {window:.2f}, first {KEEP} kept {kept:.2f}, recomputed {exact:.2f}"
    )
    return Claim(claim, paper, ours, HOLDS if window >= HURTS * kept and kept <= RECOVERS * exact else FAILS)


def _hurt(job: Job) -> Claim:
    """The precondition of the sink logit's claim: evicting the first tokens hurt the softmax model."""
    window, kept = after_context(job, "window"), after_context(job, "first_4")
    return Claim(
        "evicting the first tokens hurts the softmax model", "", f"window only {window:.2f}, first {KEEP} kept "
        f"{kept:.2f}", HOLDS if window >= HURTS * kept else FAILS,
    )  # fmt: skip


def _sink_logit(job: Job | None) -> Claim:
    claim = "with a sink logit trained into the softmax (mechanism=sink), evicting the first tokens no longer hurts"
    paper = "Xiao et al. §3.3: a sink trained in (a learnable sink token) streams without the first tokens' help"
    if job is None:
        return Claim(claim, paper, "the mechanism=sink run did not complete", UNSURE)
    window, kept = after_context(job, "window"), after_context(job, "first_4")
    ours = f"perplexity past the context: window only {window:.2f}, first {KEEP} kept {kept:.2f}"
    return Claim(claim, paper, ours, HOLDS if window <= RECOVERS * kept else FAILS)


def _plot(runs: dict[str, Job], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(1, len(runs)), figsize=(6.5 * max(1, len(runs)), 4), dpi=100, squeeze=False)
    for ax, (mechanism, job) in zip(axes[0], sorted(runs.items(), reverse=True), strict=False):
        curves, C = job.final["curves"], job.final["context"]
        for name, colour in (("recomputed", "black"), ("window", "tab:red"), ("first_4", "tab:green")):
            span = max(1, C // 4)
            local = torch.tensor(curves[name]).unfold(0, span, 1).mean(dim=-1).exp()  # over the last `span` tokens
            label = {"recomputed": "recomputed window", "window": "window only", "first_4": f"first {KEEP} + window"}
            ax.plot(range(span, span + len(local)), local, color=colour, label=label[name])
        ax.axvline(C, color="grey", linestyle=":", label="training context")
        ax.set(title=f"mechanism={mechanism} (first token {job.final['first_token']:.1f}x uniform)")
        ax.set(xlabel="tokens streamed", ylabel=f"perplexity of the last {max(1, C // 4)} tokens")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
