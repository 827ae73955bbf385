"""The tuned lens (Belrose et al., 2023): the logit lens with one affine translator per layer, trained so that
each layer's residual, translated, predicts what the network's last layer predicts.

    lens = train_tuned_lens(net, batches, steps=250)   a TunedLens: translators h -> h + A_l h + b_l, A and b from 0
    lens(net, ids)            -> (n_layer + 1, B, T, V)  each layer's residual translated, then the final norm and
                                                      the unembedding; the last layer's untranslated (the logits)
    lens_kl(net, ids, lens)   -> (n_layer + 1,)       KL(last layer || each layer's reading), the mean over tokens;
                                                      lens None: the logit lens's
    tuned_lens_of_run(run_dir) -> (lens, tuned KL, logit KL)   trained on the run's training rows, each KL over its
                                                      validation rows

Trained as the paper trains it: the network frozen, the summed KL over the layers, SGD with Nesterov momentum 0.9,
the learning rate decayed linearly to 0 (the paper: lr 1.0, 250 steps, 2^18 tokens a step; the data here: a run's).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.lens.logit_lens import residual_stream
from andrea.models.network import Network, network


class TunedLens(nn.Module):
    """One translator a layer but the last: the residual h -> h + A h + b, A and b zero at the start."""

    def __init__(self, n_layer: int, d_model: int) -> None:
        super().__init__()
        self.translators = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layer))
        for parameter in self.translators.parameters():
            nn.init.zeros_(parameter)

    def readings(self, net: Network, stream: Tensor) -> Tensor:
        """(n_layer + 1, B, T, D) residuals -> each translated and unembedded: (n_layer + 1, B, T, V)."""
        translated = [h + translator(h) for h, translator in zip(stream[:-1], self.translators, strict=True)]
        return net.unembed(torch.stack([*translated, stream[-1]]))

    def forward(self, net: Network, ids: Tensor) -> Tensor:
        with torch.no_grad():
            stream = residual_stream(net, ids)
        return self.readings(net, stream)


def _kl(readings: Tensor) -> Tensor:
    """(n_layer + 1, B, T, V) -> KL(the last reading || each), the mean over tokens: (n_layer + 1,)."""
    target = F.log_softmax(readings[-1].float(), dim=-1)
    logp = F.log_softmax(readings.float(), dim=-1)
    return (target.exp() * (target - logp)).sum(dim=-1).mean(dim=(1, 2))


@torch.no_grad()
def lens_kl(net: Network, ids: Tensor, lens: TunedLens | None = None) -> Tensor:
    """KL(the network's prediction || each layer's reading), (n_layer + 1,): the tuned lens's, or the logit lens's."""
    stream = residual_stream(net, ids)
    return _kl(net.unembed(stream) if lens is None else lens.readings(net, stream))


def train_tuned_lens(
    net: Network, batches: Iterable[Tensor], steps: int = 250, lr: float = 1.0, momentum: float = 0.9
) -> TunedLens:  # fmt: skip
    """A TunedLens for `net` from `steps` batches of ids (B, T) of a run's data; the network's weights are frozen
    while it trains (and given back as they were, gradients included)."""
    batches = iter(batches)
    lens: TunedLens | None = None
    trainable = [p for p in net.parameters() if p.requires_grad]  # type: ignore[attr-defined]  # an nn.Module
    for p in trainable:
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            with torch.no_grad():
                stream = residual_stream(net, next(batches))
            if lens is None:
                lens = TunedLens(stream.shape[0] - 1, stream.shape[-1]).to(stream.device)
                optimizer = torch.optim.SGD(lens.parameters(), lr=lr, momentum=momentum, nesterov=True)
                schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1 - i / steps)
            loss = _kl(lens.readings(net, stream)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    finally:
        for p in trainable:
            p.requires_grad_(True)
    if lens is None:
        raise ValueError("train_tuned_lens: steps must be at least 1, and batches must give as many")
    return lens


def tuned_lens_of_run(run_dir: str | Path, steps: int = 250) -> tuple[TunedLens, Tensor, Tensor]:
    """A tuned lens of a finished run's network (its last checkpoint), trained on the run's own training rows
    (its data module, andrea.data.from_run), and each layer's KL over its validation rows, the tuned lens's and the
    logit lens's: (lens, (n_layer + 1,), (n_layer + 1,))."""
    from andrea.data.from_run import data_from_run
    from andrea.models.files.load import load_any

    net = network(load_any(Path(run_dir) / "checkpoints" / "last.ckpt")[0].eval())
    data = data_from_run(run_dir)
    data.setup("fit")
    lens = train_tuned_lens(net, _rows(data.train_dataloader()), steps)
    validation = next(iter(data.val_dataloader()))["input_ids"]
    return lens, lens_kl(net, validation, lens), lens_kl(net, validation)


def _rows(loader: Iterable[dict[str, Tensor]]) -> Iterator[Tensor]:
    """The loader's input ids, batch after batch, epoch after epoch."""
    for batch in itertools.chain.from_iterable(itertools.repeat(loader)):
        yield batch["input_ids"]
