"""run_batched with an item size hint: tiny items inline unless they prove slow."""

from __future__ import annotations

import threading
import time

from chunkstore.runtime import current
from chunkstore.runtime.pool import INLINE_ITEM_BYTES


def test_tiny_items_keep_order_and_values():
    items = list(range(1000))
    assert current().pool.run_batched(lambda x: x * 3, items, item_bytes=100) == [x * 3 for x in items]
    assert current().pool.run_batched(lambda x: x, [], item_bytes=100) == []
    assert current().pool.run_batched(lambda x: -x, [5], item_bytes=100) == [-5]


def test_slow_tiny_items_move_to_the_pool():
    seen: list[str] = []

    def slow(x: int) -> int:
        time.sleep(0.002)  # far above the per-item inline budget
        seen.append(threading.current_thread().name)
        return x + 1

    items = list(range(40))
    assert current().pool.run_batched(slow, items, item_bytes=100) == [x + 1 for x in items]
    assert any(name.startswith("chunkstore") for name in seen)  # the rest ran in the pool
    assert threading.current_thread().name in seen  # the probe ran inline


def test_large_items_use_the_pool():
    seen: set[str] = set()

    def f(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x

    assert current().pool.run_batched(f, list(range(64)), item_bytes=INLINE_ITEM_BYTES) == list(range(64))
    assert any(name.startswith("chunkstore") for name in seen)


def test_one_slow_probe_does_not_send_tiny_items_to_the_pool():
    """The first items pay one-time costs (directories made, a GC pass): a slow first
    probe is followed by a second, and quick items then all stay on this thread."""
    seen: list[str] = []

    def first_slow(x: int) -> int:
        if x == 0:
            time.sleep(0.05)  # far above the budget of a whole probe
        seen.append(threading.current_thread().name)
        return x * 2

    items = list(range(200))
    assert current().pool.run_batched(first_slow, items, item_bytes=100) == [x * 2 for x in items]
    assert set(seen) == {threading.current_thread().name}


def test_tiny_items_slow_in_both_probes_move_to_the_pool():
    seen: list[str] = []

    def slow_start(x: int) -> int:
        if x < 40:  # both probes (16 items each) are slow
            time.sleep(0.002)
        seen.append(threading.current_thread().name)
        return x

    items = list(range(100))
    assert current().pool.run_batched(slow_start, items, item_bytes=100) == items
    assert seen[:32] == [threading.current_thread().name] * 32
    assert any(name.startswith("chunkstore") for name in seen[32:])


def test_probes_cover_short_lists_exactly():
    calls: list[int] = []

    def slow(x: int) -> int:
        time.sleep(0.001)
        calls.append(x)
        return x

    assert current().pool.run_batched(slow, list(range(20)), item_bytes=100) == list(range(20))
    assert sorted(calls) == list(range(20))  # each item once, probes included


def _loops_for(seconds: float) -> int:
    """Iterations of a bare Python loop that take about ``seconds`` here."""
    n, best = 20_000, float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            pass
        best = min(best, time.perf_counter() - start)
    return max(1, int(n * seconds / best))


def test_slow_tiny_items_that_hold_the_gil_stay_inline():
    """Slow only because Python itself is slow (a slow machine): a stretch is timed on
    threads, which are no quicker per item, so the rest runs on this thread again."""
    me = threading.current_thread().name
    seen: list[str] = []
    loops = _loops_for(200e-6)  # a fixed amount of work, not a deadline threads could share

    def busy(x: int) -> int:
        for _ in range(loops):  # above the per-item inline budget, all under the GIL
            pass
        seen.append(threading.current_thread().name)
        return x * 5

    items = list(range(600))
    # the pool compares wall times, which another process on the machine can skew either
    # way for one run (the inline probe preempted): the decision must show in one of 3
    for _ in range(3):
        seen.clear()
        assert current().pool.run_batched(busy, items, item_bytes=100) == [x * 5 for x in items]
        assert seen[:32] == [me] * 32  # the two inline probes
        assert any(name.startswith("chunkstore") for name in seen)  # the timed stretch
        if seen[-200:] == [me] * 200:  # the rest back on this thread
            break
    assert seen[-200:] == [me] * 200


def test_slow_tiny_items_that_release_the_gil_keep_the_pool():
    me = threading.current_thread().name
    seen: list[str] = []

    def waits(x: int) -> int:
        time.sleep(300e-6)  # IO-like: threads overlap it
        seen.append(threading.current_thread().name)
        return x - 1

    items = list(range(600))
    assert current().pool.run_batched(waits, items, item_bytes=100) == [x - 1 for x in items]
    assert seen[:32] == [me] * 32
    assert me not in seen[32:]  # the stretch and the rest both on pool threads
