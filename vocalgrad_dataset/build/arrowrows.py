"""Rows of a config as a pyarrow Table with the shard schema of `features.py`, built from buffers.

What `datasets` + `pa.Table.from_pylist` gave before (the same Parquet bytes), without importing `datasets` or
pandas: `pa.array` on a Python list imports pandas to ask whether the list is a pandas object (~0.2 s of CPU
per process), so each column is made with `pa.Array.from_buffers` from numpy arrays and joined bytes. The
build hands the audio over as int16 samples, whose WAV headers and samples are written straight into the
column's buffer (no encoder, no FFmpeg, one copy); the label is the ClassLabel's index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from vocalgrad_dataset.features import arrow_schema, columns, label_names
from vocalgrad_dataset.generate import WAV_HEADER_BYTES, wav_header
from vocalgrad_dataset.grid import Recipe

# binary and string arrays have int32 offsets: a longer column is split into chunks (a long source's shard)
MAX_CHUNK_BYTES = 2**31 - 1


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int, np.ndarray | None]:
    """Arrow validity bitmap (None when nothing is null), null count and the null mask."""
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    count = int(nulls.sum())
    if not count:
        return None, 0, None
    return pa.py_buffer(np.packbits(~nulls, bitorder="little")), count, nulls


def _chunks(lengths: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges of consecutive values whose total length stays within MAX_CHUNK_BYTES (one range if all do)."""
    if len(lengths) and lengths.max() > MAX_CHUNK_BYTES:
        raise ValueError(f"a value of {int(lengths.max())} bytes does not fit an Arrow binary array "
                         f"(at most {MAX_CHUNK_BYTES})")  # fmt: skip
    ends = np.cumsum(lengths)
    if not len(lengths) or ends[-1] <= MAX_CHUNK_BYTES:
        return [(0, len(lengths))]
    cuts, start, base = [], 0, 0
    for i, end in enumerate(ends):  # greedy: each chunk as many values as fit (at least one)
        if end - base > MAX_CHUNK_BYTES and i > start:
            cuts.append((start, i))
            start, base = i, ends[i - 1]
    return [*cuts, (start, len(lengths))]


def _from_ranges(typ: pa.DataType, lengths: np.ndarray,
                 make: Callable[[int, int, np.ndarray], tuple[pa.Buffer, pa.Buffer | None, int]]) -> pa.Array | pa.ChunkedArray:
    """A binary/string array of values with these byte lengths; make(a, b, offsets) gives the data buffer,
    validity and null count of values a to b. Chunked when the values exceed int32 offsets."""
    arrays = []
    for a, b in _chunks(lengths):
        offsets = np.zeros(b - a + 1, dtype=np.int32)
        np.cumsum(lengths[a:b], out=offsets[1:])
        data, validity, nulls = make(a, b, offsets)
        arrays.append(pa.Array.from_buffers(typ, b - a, [validity, pa.py_buffer(offsets), data], null_count=nulls))
    return arrays[0] if len(arrays) == 1 else pa.chunked_array(arrays, typ)


def _bytes_array(values: Sequence[bytes | None], typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A binary or string array of bytes values (None = null)."""
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=len(values))

    def make(a: int, b: int, offsets: np.ndarray) -> tuple[pa.Buffer, pa.Buffer | None, int]:
        part = values[a:b]
        validity, nulls, _ = _validity(part)
        return pa.py_buffer(b"".join(v for v in part if v is not None)), validity, nulls

    return _from_ranges(typ, lengths, make)


def _wav_array(audio: Sequence[dict[str, Any]]) -> pa.Array | pa.ChunkedArray:
    """The WAV bytes of rows whose audio is {"pcm16": mono int16 samples, "sampling_rate"}: each header and its
    samples written straight into the column's buffer (one copy, where WAV bytes objects joined were two)."""
    lengths = np.fromiter((WAV_HEADER_BYTES + 2 * len(a["pcm16"]) for a in audio), dtype=np.int64, count=len(audio))

    def make(a: int, b: int, offsets: np.ndarray) -> tuple[pa.Buffer, None, int]:
        # one Arrow buffer per column, filled in place (the samples are copied once)
        buffer = pa.allocate_buffer(int(offsets[-1]))
        data = np.frombuffer(buffer, dtype=np.uint8)
        for start, value in zip(offsets[:-1].tolist(), audio[a:b], strict=True):
            pcm = value["pcm16"]
            data[start : start + WAV_HEADER_BYTES] = np.frombuffer(wav_header(len(pcm), value["sampling_rate"]), np.uint8)
            data[start + WAV_HEADER_BYTES : start + WAV_HEADER_BYTES + 2 * len(pcm)].view("<i2")[:] = pcm
        return buffer, None, 0

    return _from_ranges(pa.binary(), lengths, make)


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


def rows_table(rows: Sequence[dict[str, Any]], recipe: Recipe | None = None) -> pa.Table:
    """A config's rows (audio as {"bytes", "path"}, or as {"pcm16", "sampling_rate", "path"}) as the Arrow table of a shard of a config made by `recipe` (default: the main one)."""
    schema = arrow_schema(recipe)
    index = {name: i for i, name in enumerate(label_names(recipe))}
    arrays = []
    for field, (name, kind) in zip(schema, columns(recipe), strict=True):
        if kind == "audio":
            audio = [r[name] for r in rows]
            pcm = [a for a in audio if "pcm16" in a]
            if pcm and len(pcm) != len(audio):
                raise ValueError("rows_table: audio must be all WAV bytes or all pcm16 samples")
            data = _wav_array(audio) if pcm else _bytes_array([a["bytes"] for a in audio], pa.binary())
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
                raise ValueError(f"label {exc.args[0]!r} is not one of the recipe's labels {list(index)}") from None
        else:
            arrays.append(_column([r[name] for r in rows], field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
