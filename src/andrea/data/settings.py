"""The data modules' settings, declared once: each data module checks its arguments against DATA, and
the config checks read it as `data.*` (andrea.train.keys.RANGES).

    vocab_size, seq_len, batch_size     positive integers (a text module's vocab_size is its tokenizer's)
    num_train, num_val                  rows of a synthetic task, positive integers
    samples_per_epoch, val_fraction     text: windows drawn per epoch; the held-out share, in (0, 1)
    num_workers                         DataLoader workers, an integer >= 0
    max_bytes                           text: the most text read without confirming, a positive integer
    bos                                 text: every window starts with the end-of-text id, true or false
"""

from __future__ import annotations

from andrea.utils.rules import BOOLEAN, POSITIVE, Rule, integer, number

DATA: dict[str, Rule] = {
    "vocab_size": POSITIVE,
    "seq_len": POSITIVE,
    "batch_size": POSITIVE,
    "num_train": POSITIVE,
    "num_val": POSITIVE,
    "samples_per_epoch": POSITIVE,
    "val_fraction": number(0.0, 1.0, low_open=True, high_open=True),
    "num_workers": integer(0),
    "max_bytes": POSITIVE,
    "bos": BOOLEAN,
}
