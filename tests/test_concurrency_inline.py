"""run_batched with an item size hint: tiny items inline unless they prove slow."""

from __future__ import annotations

import threading
import time

from chunkstore.concurrency import INLINE_ITEM_BYTES, run_batched


def test_tiny_items_keep_order_and_values():
    items = list(range(1000))
    assert run_batched(lambda x: x * 3, items, item_bytes=100) == [x * 3 for x in items]
    assert run_batched(lambda x: x, [], item_bytes=100) == []
    assert run_batched(lambda x: -x, [5], item_bytes=100) == [-5]


def test_slow_tiny_items_move_to_the_pool():
    seen: list[str] = []

    def slow(x: int) -> int:
        time.sleep(0.002)  # far above the per-item inline budget
        seen.append(threading.current_thread().name)
        return x + 1

    items = list(range(40))
    assert run_batched(slow, items, item_bytes=100) == [x + 1 for x in items]
    assert any(name.startswith("chunkstore") for name in seen)  # the rest ran in the pool
    assert threading.current_thread().name in seen  # the probe ran inline


def test_large_items_use_the_pool():
    seen: set[str] = set()

    def f(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x

    assert run_batched(f, list(range(64)), item_bytes=INLINE_ITEM_BYTES) == list(range(64))
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
    assert run_batched(first_slow, items, item_bytes=100) == [x * 2 for x in items]
    assert set(seen) == {threading.current_thread().name}


def test_tiny_items_slow_in_both_probes_move_to_the_pool():
    seen: list[str] = []

    def slow_start(x: int) -> int:
        if x < 40:  # both probes (16 items each) are slow
            time.sleep(0.002)
        seen.append(threading.current_thread().name)
        return x

    items = list(range(100))
    assert run_batched(slow_start, items, item_bytes=100) == items
    assert seen[:32] == [threading.current_thread().name] * 32
    assert any(name.startswith("chunkstore") for name in seen[32:])


def test_probes_cover_short_lists_exactly():
    calls: list[int] = []

    def slow(x: int) -> int:
        time.sleep(0.001)
        calls.append(x)
        return x

    assert run_batched(slow, list(range(20)), item_bytes=100) == list(range(20))
    assert sorted(calls) == list(range(20))  # each item once, probes included
