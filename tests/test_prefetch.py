"""run_ahead, the runner's front-end pipeline: order, errors, bounded look-ahead (no timing, no sleeps)."""

from __future__ import annotations

import threading

import pytest

from harness.prefetch import run_ahead


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_order_and_values_equal_the_serial_path(workers: int) -> None:
    items = list(range(40))
    got = list(run_ahead(iter(items), lambda i: i * i, workers))
    assert got == [(i, i * i) for i in items]


def test_an_error_surfaces_at_its_item_after_the_earlier_ones() -> None:
    def prepare(i: int) -> int:
        if i == 5:
            raise ValueError("bad row 5")
        return i

    seen = []
    with pytest.raises(ValueError, match="bad row 5"):
        for item, value in run_ahead(iter(range(10)), prepare, 2):
            seen.append((item, value))
    assert seen == [(i, i) for i in range(5)]


def test_an_error_in_the_items_surfaces_too() -> None:
    def items():
        yield 1
        raise OSError("decode failed")

    got = []
    with pytest.raises(OSError, match="decode failed"):
        got.extend(run_ahead(items(), str, 1))
    assert got == [(1, "1")]


@pytest.mark.parametrize("workers,depth", [(1, 2), (2, 4), (2, 1)])
def test_look_ahead_is_bounded_and_reached(workers: int, depth: int) -> None:
    """With a consumer that waits for the pipeline to fill, at most `depth` items are ever pulled and not yet
    done with (the one being consumed included), and that bound is reached: work does run ahead."""
    lock = threading.Condition()
    state = {"started": 0, "consumed": 0, "peak": 0}
    n = 30

    def prepare(i: int) -> int:
        with lock:
            state["started"] += 1
            state["peak"] = max(state["peak"], state["started"] - state["consumed"])
            lock.notify_all()
        return i

    bound = depth
    for _item, _ in run_ahead(iter(range(n)), prepare, workers, depth):
        with lock:
            # wait (on a condition, not a clock) until the pipeline is as full as it may get, or drained
            assert lock.wait_for(lambda: state["started"] - state["consumed"] >= bound or state["started"] == n,
                                 timeout=30)
            state["consumed"] += 1  # done with this item: its slot is given back when the next is asked for
    assert state["started"] == n
    assert state["peak"] == bound


def _digest(rows: list[dict]) -> list[tuple[str, str]]:
    import hashlib

    import numpy as np

    return [(r["benchmark_clip_id"], hashlib.sha256(np.ascontiguousarray(r["audio"]["array"]).tobytes()).hexdigest())
            for r in rows]


def test_the_row_pool_yields_the_serial_rows_in_order_across_configs() -> None:
    """RowPool (--data-workers): pieces of units rendered in 2 processes come back as the serial path's rows,
    in its order; the next config's tasks started ahead (`then`) are used when asked for, dropped if not."""
    from harness.data import GeneratorSource
    from harness.prefetch import RowPool, chunk_units

    source = GeneratorSource("test", "demo")
    units = {c: source.units(c)[:2] for c in ("volume", "pitch", "noise")}
    serial = {c: _digest(list(source.rows(c, u))) for c, u in units.items()}
    assert [len(p.clip_ids) for p in chunk_units(units["volume"], 10)] == [10, 10, 4, 10, 10, 4]
    with RowPool(2, chunk=10) as pool:
        assert len(set(pool.wait_ready())) == 2
        ahead = pool.tasks("pitch", units["pitch"])
        assert _digest(list(pool.rows(source, pool.tasks("volume", units["volume"]), None, then=ahead))) == serial["volume"]
        assert [t for t, _ in pool.inflight] == ahead[: len(pool.inflight)] and pool.inflight  # started ahead
        assert _digest(list(pool.rows(source, ahead, None, then=pool.tasks("pitch", units["pitch"][:1])))) == serial["pitch"]
        # a guess that is wrong (pitch again, noise asked) is dropped: noise still comes out whole and in order
        assert _digest(list(pool.rows(source, pool.tasks("noise", units["noise"]), None))) == serial["noise"]
