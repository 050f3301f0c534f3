"""The front end ahead of the model: rows by background processes (DataLoader workers over source clips),
then prompts and model inputs by a pool of front-end threads (run_ahead)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from queue import Queue
from typing import Any, TypeVar

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from harness.data import BenchRow, RowSource, SourceUnit

T = TypeVar("T")
U = TypeVar("U")


def _identity(x: Any) -> Any:
    return x


def prefetched_rows(source: RowSource, config: str, units: Sequence[SourceUnit], workers: int,
                    front_end: Callable[[BenchRow], BenchRow] | None = None) -> Iterator[BenchRow]:
    """The units' rows, produced by `workers` background processes (each takes every workers-th unit), each
    row passed through `front_end` (picklable: prompt, resampling, per-clip features) in its process.

    Generation, decoding and the per-row front end then overlap the model's forward passes and each other;
    rows of different units may interleave, which the runner does not rely on (it merges by clip id). With
    no workers, rows come from this process and `front_end` is not applied (the caller's threads do it).
    """
    if workers <= 0 or len(units) <= 1:
        yield from source.rows(config, units)
        return
    # spawn: workers must not inherit CUDA state, nor locks held by this process's other threads (a fork
    # from the runner's front-end threads deadlocked its workers)
    # the plain name: a resolved config object may hold generator callables that do not pickle
    yield from DataLoader(UnitRows(source, str(config), list(units), front_end), batch_size=None,
                          num_workers=min(workers, len(units)), collate_fn=_identity,
                          multiprocessing_context="spawn", prefetch_factor=8)  # fmt: skip


class UnitRows(IterableDataset):
    """Rows of one DataLoader worker's share of the units (units[id::num_workers]), through `front_end`."""

    def __init__(self, source: RowSource, config: str, units: list[SourceUnit],
                 front_end: Callable[[BenchRow], BenchRow] | None = None) -> None:
        self.source, self.config, self.units, self.front_end = source, config, units, front_end

    def __iter__(self) -> Iterator[BenchRow]:
        info = get_worker_info()
        units = self.units if info is None else self.units[info.id :: info.num_workers]
        rows = self.source.rows(self.config, units)
        yield from rows if self.front_end is None else map(self.front_end, rows)


_DONE = object()


def run_ahead(items: Iterable[T], prepare: Callable[[T], U], workers: int,
              depth: int | None = None) -> Iterator[tuple[T, U]]:
    """(item, prepare(item)) in the items' order, prepared ahead by `workers` threads (0: in the caller's
    thread, the serial path).

    A feeder thread pulls the items (decoding rows when no DataLoader workers do) and hands each to the pool;
    the pool runs `prepare` (prompt template, resampling, features: numpy and soxr release the GIL) while the
    caller runs the model on an earlier item. At most `depth` (default 4 * workers) items are pulled and not
    yet done with (the caller's current one included), which bounds memory; results come back in the items' order, so shards and resume are
    unchanged. An exception in `prepare` or in the items is raised here, at the item where it happened.
    """
    if workers <= 0:
        for item in items:
            yield item, prepare(item)
        return
    ahead = _Ahead(items, prepare, workers, depth or 4 * workers)
    try:
        yield from ahead
    finally:
        ahead.close()


class _Ahead:
    """The feeder thread and worker pool of run_ahead. A slot (of `depth`) is taken before an item is pulled
    and given back when the consumer asks for the next item, so at most `depth` items are pulled and not yet
    done with, the one the consumer works on included."""

    def __init__(self, items: Iterable[Any], prepare: Callable[[Any], Any], workers: int, depth: int) -> None:
        self.items, self.prepare = items, prepare
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="vocalgrad-frontend")
        self.queue: Queue[Any] = Queue()  # bounded by the slots
        self.slots = threading.Semaphore(depth)
        self.stop = threading.Event()
        threading.Thread(target=self._feed, name="vocalgrad-feeder", daemon=True).start()

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        while (value := self.queue.get()) is not _DONE:
            if isinstance(value, _Failure):
                raise value.error
            item, future = value
            yield item, future.result()
            self.slots.release()  # the consumer is done with this item

    def close(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _slot(self) -> bool:
        while not self.stop.is_set():  # a timeout, so a consumer that left never strands the thread
            if self.slots.acquire(timeout=0.1):
                return True
        return False

    def _feed(self) -> None:
        try:
            it = iter(self.items)
            while self._slot():
                try:
                    item = next(it)
                except StopIteration:
                    break
                self.queue.put((item, self.pool.submit(self.prepare, item)))
            else:
                return  # the consumer left
        except BaseException as err:  # noqa: BLE001 - handed to the consumer, which re-raises it
            self.queue.put(_Failure(err))
            return
        self.queue.put(_DONE)


class _Failure:
    """An exception raised in the front-end thread, carried to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
