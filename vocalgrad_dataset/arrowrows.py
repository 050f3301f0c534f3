"""Rows of a config as a pyarrow Table with the shard schema of `features.py`, built from buffers.

What `datasets` + `pa.Table.from_pylist` gave before (the same Parquet bytes), without importing `datasets` or
pandas: `pa.array` on a Python list imports pandas to ask whether the list is a pandas object (~0.2 s of CPU
per process), so each column is made with `pa.Array.from_buffers` from numpy arrays and joined bytes. The
audio column is already WAV bytes (no encoder, no FFmpeg) and the label is the ClassLabel's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .features import arrow_schema, columns, label_names

# binary and string arrays have int32 offsets: a longer column is split into chunks (a long source's shard)
MAX_CHUNK_BYTES = 2**31 - 1


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int, np.ndarray | None]:
    """Arrow validity bitmap (None when nothing is null), null count and the null mask."""
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    count = int(nulls.sum())
    if not count:
        return None, 0, None
    return pa.py_buffer(np.packbits(~nulls, bitorder="little")), count, nulls


def _bytes_array(values: Sequence[bytes | None], typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A binary or string array of bytes values (None = null), in chunks of at most MAX_CHUNK_BYTES."""
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    if len(values) and ends[-1] > MAX_CHUNK_BYTES:
        cuts, start = [], 0
        for i, end in enumerate(ends):  # greedy: each chunk as many values as fit
            if end - (ends[start - 1] if start else 0) > MAX_CHUNK_BYTES and i > start:
                cuts.append((start, i))
                start = i
        cuts.append((start, len(values)))
        return pa.chunked_array([_bytes_array(values[a:b], typ) for a, b in cuts], typ)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    offsets[1:] = ends
    validity, nulls, _ = _validity(values)
    data = pa.py_buffer(b"".join(v for v in values if v is not None))
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(offsets), data], null_count=nulls)


def _column(values: Sequence[Any], typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """One metadata column (string, float64, int64 or bool; None = null) of the given Arrow type."""
    if typ == pa.string():
        return _bytes_array([None if v is None else v.encode("utf-8") for v in values], typ)
    validity, nulls, mask = _validity(values)
    filled = values if mask is None else [0 if m else v for v, m in zip(values, mask, strict=True)]
    if typ == pa.bool_():
        data = pa.py_buffer(np.packbits(np.array(filled, dtype=bool), bitorder="little"))
    else:
        data = pa.py_buffer(np.array(filled, dtype=typ.to_pandas_dtype()))
    return pa.Array.from_buffers(typ, len(values), [validity, data], null_count=nulls)


def rows_table(rows: Sequence[dict[str, Any]], fmt: str = "direction") -> pa.Table:
    """A config's rows (audio as {"bytes", "path"}) as the Arrow table of a shard in problem format `fmt`."""
    schema = arrow_schema(fmt)
    index = {name: i for i, name in enumerate(label_names(fmt))}
    arrays = []
    for field, (name, kind) in zip(schema, columns(fmt), strict=True):
        if kind == "audio":
            audio = [r[name] for r in rows]
            data = _bytes_array([a["bytes"] for a in audio], pa.binary())
            paths = _bytes_array([a["path"].encode("utf-8") for a in audio], pa.string())
            if isinstance(data, pa.ChunkedArray):  # the paths follow the WAV bytes' chunks
                ends = np.cumsum([len(c) for c in data.chunks])
                paths = pa.chunked_array([paths.slice(e - len(c), len(c)) for e, c in zip(ends, data.chunks, strict=True)])
                arrays.append(pa.chunked_array([pa.StructArray.from_arrays([c, p], fields=list(field.type))
                                                for c, p in zip(data.chunks, paths.chunks, strict=True)]))  # fmt: skip
            else:
                arrays.append(pa.StructArray.from_arrays([data, paths], fields=list(field.type)))
        elif kind == "label":
            try:
                arrays.append(_column([index[r[name]] for r in rows], pa.int64()))
            except KeyError as exc:
                raise ValueError(f"label {exc.args[0]!r} is not one of the {fmt} format's labels {list(index)}") from None
        else:
            arrays.append(_column([r[name] for r in rows], field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
