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
