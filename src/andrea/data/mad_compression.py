"""MAD's compression (Poli et al. 2024; athms/mad-lab's generate_compression_instance): `seq_len - 1` tokens drawn
uniformly from all but the last, then the compression token (the last); the labels are the row itself, every
position. A next-token readout sees the token it is asked for, so the task trains only with MAD's autoencoder
readout, the last position's code decoded at every position (`model.net.readout=pooled_last`,
andrea.models.pooled_readout): the config checks refuse it otherwise, before anything is built
(andrea.train.checks_data.READOUTS).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.data.tasks import SyntheticTaskDataModule


class CompressionDataModule(SyntheticTaskDataModule):
    name = "compression"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.seq_len < 2 or self.vocab_size < 2:
            raise ValueError(
                f"data.seq_len={self.seq_len}, data.vocab_size={self.vocab_size}: compression needs a row of 2 tokens "
                "or more (one the compression token) and a vocabulary of 2 or more"
            )

    def make_rows(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        ids = torch.full((n, self.seq_len), self.vocab_size - 1, dtype=torch.long)  # the compression token last
        ids[:, :-1] = torch.randint(self.vocab_size - 1, (n, self.seq_len - 1), generator=generator)
        return ids, ids.clone()
