"""Shards written past the page cache (O_DIRECT): the same bytes as a buffered write, the user's umask, and a
buffered fallback where the filesystem refuses O_DIRECT."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from vocalgrad_dataset import export, fileio
from vocalgrad_dataset.fileio import DIRECT_IO_BLOCK, atomic_path, write_unbuffered


def _aligned(data: bytes) -> memoryview:
    buf = mmap.mmap(-1, max(1, len(data)))
    buf[: len(data)] = data
    return memoryview(buf)[: len(data)]


def _direct_supported(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_bytes(b"")
    try:
        os.close(os.open(probe, os.O_WRONLY | getattr(os, "O_DIRECT", 0)))
    except OSError:
        return False
    return hasattr(os, "O_DIRECT")


@pytest.mark.parametrize("size", [0, 1, DIRECT_IO_BLOCK - 1, DIRECT_IO_BLOCK, DIRECT_IO_BLOCK + 1, 3 * DIRECT_IO_BLOCK + 517])
def test_write_unbuffered_writes_the_exact_bytes_with_the_umask(size: int, tmp_path: Path) -> None:
    data = os.urandom(size)
    old = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "f.bin") as tmp:
            tmp.write_bytes(b"stale content longer than some of the sizes" * 200)  # replaced, not overwritten in place
            used = write_unbuffered(tmp, _aligned(data))
    finally:
        os.umask(old)
    assert (tmp_path / "f.bin").read_bytes() == data
    assert (tmp_path / "f.bin").stat().st_mode & 0o777 == 0o640
    # O_DIRECT carries the whole blocks wherever the filesystem takes it (not on tmpfs)
    assert used == (size >= DIRECT_IO_BLOCK and _direct_supported(tmp_path))


@pytest.mark.parametrize("refused_at", ["open", "write"])
def test_write_unbuffered_falls_back_to_a_buffered_write_when_o_direct_is_refused(
    refused_at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(5 * DIRECT_IO_BLOCK + 3)
    direct = getattr(os, "O_DIRECT", 0o40000)
    monkeypatch.setattr(os, "O_DIRECT", direct, raising=False)
    real_open, real_write = os.open, os.write
    direct_fds: set[int] = set()

    def fake_open(path, flags, *args):  # noqa: ANN001, ANN002, ANN202
        if flags & direct:
            if refused_at == "open":
                raise OSError(errno.EINVAL, "Invalid argument")
            fd = real_open(path, flags & ~direct, *args)  # opened "with O_DIRECT", which then refuses the transfer
            direct_fds.add(fd)
            return fd
        return real_open(path, flags, *args)

    def fake_write(fd, buf):  # noqa: ANN001, ANN202
        if fd in direct_fds:
            direct_fds.discard(fd)
            real_write(fd, bytes(buf)[:100])  # part of it lands before the refusal: written over from 0
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, buf)

    monkeypatch.setattr(fileio.os, "open", fake_open)
    monkeypatch.setattr(fileio.os, "write", fake_write)
    monkeypatch.setattr(fileio.fcntl, "fcntl", lambda fd, cmd, arg=0: 0)
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    assert write_unbuffered(target, _aligned(data)) is False
    assert target.read_bytes() == data


def test_a_build_writes_the_same_shard_bytes_unbuffered_and_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vocalgrad_dataset.cli import main as cli

    args = ["build", "--config", "pitch", "--split", "test", "--source", "demo", "--quiet", "--out"]
    assert cli([*args, str(tmp_path / "direct")]) == 0
    monkeypatch.setattr(export, "DIRECT_WRITE_MAX_BYTES", 0)  # every shard streamed by pyarrow, as before
    assert cli([*args, str(tmp_path / "streamed")]) == 0
    a, b = (sorted((tmp_path / d).rglob("*.parquet")) for d in ("direct", "streamed"))
    assert len(a) == len(b) == 1 and a[0].read_bytes() == b[0].read_bytes()
    assert pq.read_metadata(a[0]).num_rows == 72
    assert export._SCRATCH._map is None  # the serialising buffer is released after the build


def test_a_shard_larger_than_its_bound_is_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    table = pa.table({"audio": pa.array([os.urandom(300_000) for _ in range(4)]), "id": ["a", "b", "c", "d"]})
    monkeypatch.setattr(export, "DIRECT_WRITE_MAX_BYTES", 1 << 20)  # 1.2 MB of table: over the bound
    assert export._SCRATCH.serialise(table, export._parquet_options(table.column_names)) is None
    export._write_table_file(table, tmp_path / "s.parquet")
    assert pq.read_table(tmp_path / "s.parquet").equals(table)
    monkeypatch.setattr(export, "DIRECT_WRITE_MAX_BYTES", 64 << 20)
    view = export._SCRATCH.serialise(table, export._parquet_options(table.column_names))
    assert view is not None and bytes(view) == (tmp_path / "s.parquet").read_bytes()
    view.release()
    export._SCRATCH.release()
