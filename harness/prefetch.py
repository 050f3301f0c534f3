"""The front end ahead of the model: rows by background processes (RowPool, --data-workers: one spawn pool
per run, fed by pieces of source units, its rows in the serial path's order), then prompts and model inputs
by a pool of front-end threads (run_ahead, --frontend-workers)."""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import pickle
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from queue import Queue
from typing import Any, TypeVar

from harness.data import BenchRow, RowSource, SourceUnit

T = TypeVar("T")
U = TypeVar("U")


def chunk_units(units: Sequence[SourceUnit], clips: int) -> list[SourceUnit]:
    """The units cut into pieces of at most `clips` clips, in order (a source renders just the clips it is
    asked for, in the unit's order, so the pieces' rows one after the other are the unit's rows)."""
    out = []
    for u in units:
        for i in range(0, len(u.clip_ids), clips):
            part = u.clip_ids[i : i + clips]
            out.append(SourceUnit(u.key, u.duration_sec * len(part) / len(u.clip_ids), tuple(part)))
    return out


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def one_thread_each() -> Iterator[None]:
    """Processes started inside inherit one BLAS / OpenMP thread each (read at their import), as DataLoader
    workers do: N row processes with a thread per core each would oversubscribe the cores (measured on 2
    cores: 1.2x over the serial path with the default threads, 2.0x with one). The caller's own stay."""
    saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_START_BARRIER: Any = None  # a pool process's copy of the pool's start barrier (see RowPool.wait_ready)


def _warm_worker(barrier: Any) -> None:
    """A pool process's start: the imports every task needs, once, while the model loads (else the first
    task pays them: ~2 s for transformers' feature extractors, ~1.6 s for librosa's lazily loaded resampler)."""
    global _START_BARRIER
    _START_BARRIER = barrier
    import librosa.core.audio  # noqa: F401 - resampling to the model's rate (lazy_loader defers it)
    import scipy.signal  # noqa: F401
    import torch
    import transformers.models.whisper.feature_extraction_whisper  # noqa: F401 - the log-mel front ends

    torch.set_num_threads(1)  # torch's intra-op pool too (one_thread_each covers OpenMP and BLAS)
    import harness.prompts  # noqa: F401 - prompts, vocabularies
    import vocalgrad_dataset.generate  # noqa: F401 - the generator


def _ready() -> int:
    """One per process: each waits for the others, so no process can take two (a fast process would
    otherwise run every one while the rest are still importing)."""
    with contextlib.suppress(threading.BrokenBarrierError):
        _START_BARRIER.wait(timeout=600)
    return multiprocessing.current_process().pid or 0


_CONTEXT: dict[str, Any] = {}  # a pool process's (source, front end) by token: unpickled once, caches kept


def _chunk_rows(token: str, context: bytes, config: str, unit: SourceUnit) -> list[BenchRow]:
    """One task of a pool process: the rows of one piece of a unit, through the front end."""
    if token not in _CONTEXT:
        _CONTEXT.clear()
        _CONTEXT[token] = pickle.loads(context)
    source, front_end = _CONTEXT[token]
    rows = source.rows(config, [unit])
    return list(rows if front_end is None else map(front_end, rows))


Task = tuple[str, SourceUnit]  # (config name, a piece of a unit)


class RowPool:
    """Row processes created once per run (spawn: no CUDA state nor another thread's locks are inherited),
    before the model loads, so their imports overlap the loading; each task is one piece of a source unit
    (the config by name: resolved configs hold lambdas), its rows come back built (generation, prompt,
    per-clip front end), and they are yielded in the tasks' order, so batches, shards and resume are the
    serial path's. At most `depth` tasks are in flight; tasks of the next config (`then`) are started
    while this one ends, and kept for the next call when it asks for the same ones (else dropped)."""

    def __init__(self, workers: int, depth: int | None = None, chunk: int = 8) -> None:
        self.workers, self.depth, self.chunk = workers, depth or 2 * workers, chunk
        spawn = multiprocessing.get_context("spawn")
        self.executor = ProcessPoolExecutor(workers, mp_context=spawn, initializer=_warm_worker,
                                            initargs=(spawn.Barrier(workers),))
        self.inflight: deque[tuple[Task, Future[list[BenchRow]]]] = deque()
        with one_thread_each():
            self._started = [self.executor.submit(_ready) for _ in range(workers)]  # starts every process now

    def wait_ready(self) -> list[int]:
        """Block until every process has started (imports done); their pids, one each."""
        return [f.result() for f in self._started]

    def tasks(self, config: str, units: Sequence[SourceUnit]) -> list[Task]:
        return [(str(config), u) for u in chunk_units(units, self.chunk)]

    def rows(self, source: RowSource, tasks: Sequence[Task], front_end: Callable[[BenchRow], BenchRow] | None,
             then: Sequence[Task] = ()) -> Iterator[BenchRow]:
        """The rows of `tasks` in order; `then`: the tasks the next call will likely ask for."""
        todo = deque(tasks)
        kept: deque[tuple[Task, Future[list[BenchRow]]]] = deque()
        while self.inflight and todo and len(kept) < len(todo) and self.inflight[0][0] == todo[len(kept)]:
            kept.append(self.inflight.popleft())  # started by the previous call as its `then`
        self._drop()
        self.inflight = kept
        pending = deque(list(todo)[len(kept):] + list(then))
        token, context = self._context(source, front_end)
        for _ in range(len(todo)):
            while pending and len(self.inflight) < self.depth:
                task = pending.popleft()
                self.inflight.append((task, self.executor.submit(_chunk_rows, token, context, *task)))
            _task, future = self.inflight.popleft()
            yield from future.result()

    @staticmethod
    def _context(source: RowSource, front_end: Any) -> tuple[str, bytes]:
        """(token, pickled (source, front end)): the token is the bytes' digest, so a process unpickles
        equal contexts once and the source's caches (source clips, speech) live on across tasks and configs."""
        context = pickle.dumps((source, front_end))
        return hashlib.sha256(context).hexdigest(), context

    def _drop(self) -> None:
        while self.inflight:
            self.inflight.popleft()[1].cancel()

    def close(self) -> None:
        self._drop()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> RowPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_DONE = object()


def run_ahead(items: Iterable[T], prepare: Callable[[T], U], workers: int,
              depth: int | None = None) -> Iterator[tuple[T, U]]:
    """(item, prepare(item)) in the items' order, prepared ahead by `workers` threads (0: in the caller's
    thread, the serial path).

    A feeder thread pulls the items (decoding rows when no row processes do) and hands each to the pool;
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
