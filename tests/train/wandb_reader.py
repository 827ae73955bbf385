"""Read back what an offline wandb run wrote: its `.wandb` file of protobuf records.

The file is a 7-byte header and then a LevelDB-style log: 32 KiB blocks of
records, each with a 7-byte header (crc32, little-endian length, type), a
record split across blocks as FIRST/MIDDLE/LAST pieces.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

# protobuf builds its message classes at import time: the generated module declares none for mypy to see
from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]

BLOCK, HEADER, FILE_HEADER = 32 * 1024, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: str | Path) -> list[Record]:
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a wandb run file")
    out, pending, pos = [], b"", FILE_HEADER
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # the rest of a block too small for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def run_file(run_dir: str | Path) -> Path:
    """The single offline-run-*/run-*.wandb file under a run dir."""
    (found,) = Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")
    return found


def history(run_dir: str | Path) -> list[dict]:
    """Every wandb.log() call of the run, as dicts of plain values."""
    rows = []
    for record in records(run_file(run_dir)):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


def run_info(run_dir: str | Path) -> Record:
    return next(r.run for r in records(run_file(run_dir)) if r.WhichOneof("record_type") == "run")
