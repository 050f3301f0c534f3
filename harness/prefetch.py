"""Rows produced ahead of the model by background processes (DataLoader workers over source clips)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from harness.data import BenchRow, RowSource, SourceUnit


def _identity(x: Any) -> Any:
    return x


def prefetched_rows(source: RowSource, config: str, units: Sequence[SourceUnit], workers: int) -> Iterator[BenchRow]:
    """The units' rows, produced by `workers` background processes (each takes every workers-th unit).

    Generation and decoding then overlap the model's forward passes; rows of different units may
    interleave, which the runner does not rely on (it merges by clip id).
    """
    if workers <= 0 or len(units) <= 1:
        yield from source.rows(config, units)
        return
    # spawn: workers must not inherit CUDA state or the parent's thread pools
    yield from DataLoader(UnitRows(source, config, list(units)), batch_size=None, num_workers=min(workers, len(units)),
                          collate_fn=_identity, multiprocessing_context="spawn", prefetch_factor=8)  # fmt: skip


class UnitRows(IterableDataset):
    """Rows of one DataLoader worker's share of the units (units[id::num_workers])."""

    def __init__(self, source: RowSource, config: str, units: list[SourceUnit]) -> None:
        self.source, self.config, self.units = source, config, units

    def __iter__(self) -> Iterator[BenchRow]:
        info = get_worker_info()
        units = self.units if info is None else self.units[info.id :: info.num_workers]
        yield from self.source.rows(self.config, units)
