"""Read an offline W&B run file (`run-*.wandb`) with wandb's own protobuf records, in a process of its own.

W&B brings protobuf 7, which must not load beside transformers in the test process: scripts/setup.sh installs
wandb apart from .venv into .extras/wandb, and tests run this module there (`python -m tests.helpers.wandb_reader
RUN_FILE` with that folder on PYTHONPATH), which prints the run's summary, config and logged tables as JSON.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

BLOCK, HEADER = 32768, 7  # W&B's log format: 32 KiB blocks of records, each chunk behind a 7-byte header


def _chunks(data: bytes) -> list[bytes]:
    """The records' bytes of a .wandb file (chunks joined across blocks)."""
    assert data[:4] == b":W&B"
    pos, chunks, pending = HEADER, [], b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if kind == 0:
            pos += left
            continue
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            chunks.append(pending)
            pending = b""
    return chunks


def wandb_records(path: Path) -> list[Any]:
    """Every Record of a .wandb file, in order."""
    from wandb.proto import wandb_internal_pb2

    records = []
    for chunk in _chunks(path.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(chunk)
        records.append(record)
    return records


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def summary_of(records: list[Any]) -> dict[str, Any]:
    """The run summary: the latest history value of each key, then the explicit summary updates."""
    out: dict[str, Any] = {}
    for r in records:
        kind = r.WhichOneof("record_type")
        items = r.history.item if kind == "history" else r.summary.update if kind == "summary" else []
        out.update({_key(i): json.loads(i.value_json) for i in items})
    return out


def read_run(path: Path) -> dict[str, Any]:
    """{"summary", "config", "tables": {artifact name: its file paths}} of one offline run file."""
    records = wandb_records(path)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    return {"summary": summary_of(records),
            "config": {i.key: json.loads(i.value_json) for i in run.config.update},
            "tables": {r.artifact.name: [e.path for e in r.artifact.manifest.contents]
                       for r in records if r.WhichOneof("record_type") == "artifact"}}


if __name__ == "__main__":
    print(json.dumps(read_run(Path(sys.argv[1]))))
