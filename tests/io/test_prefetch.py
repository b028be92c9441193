"""Reads ahead (``io.prefetch``): later batches are fetched while the current one is
used (up to ``depth`` of them), in order, on threads outside the chunk IO pool; errors
reach the reader."""

import threading
import time
from dataclasses import replace

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io import plain
from chunkstore.io.prefetch import ReadAheadThreads, ahead
from chunkstore.runtime import current


def test_order_overlap_and_thread():
    log, names = [], set()

    def fetch(b):
        names.add(threading.current_thread().name)
        log.append(("fetch", b))
        time.sleep(0.01)
        return b * 10

    got = []
    for b, value in ahead(range(4), fetch):
        got.append(value)
        time.sleep(0.05)  # the next fetch runs meanwhile
        log.append(("used", b))
    assert got == [0, 10, 20, 30]
    # batch b+1 is being fetched while batch b is in use
    for b in range(3):
        assert log.index(("fetch", b + 1)) < log.index(("used", b)), log
    assert all(not n.startswith("chunkstore") for n in names)


def test_fetch_threads_are_kept_between_reads():
    def names():
        return {t.name for t in threading.enumerate() if t.name.startswith("cs-read-ahead")}

    def fetch(b):
        time.sleep(0.005)
        return b

    assert list(ahead(range(6), fetch, 3)) == [(b, b) for b in range(6)]
    first = {t for t in threading.enumerate() if t.name.startswith("cs-read-ahead")}
    assert first and len(first) <= 3 + 2  # depth threads (+ the fetches at the end)
    assert list(ahead(range(6), fetch, 3)) == [(b, b) for b in range(6)]
    kept = {t for t in threading.enumerate() if t.name.startswith("cs-read-ahead")}
    assert first <= kept and names()  # the same threads served the second read
    # an early stop cancels the fetches not started
    started = []
    gen = ahead(range(100), lambda b: started.append(b) or time.sleep(0.01) or b, 4)
    next(gen)
    gen.close()
    time.sleep(0.1)
    assert len(started) <= 6
    current().part(ReadAheadThreads).close()  # the threads end; the next read makes more
    assert list(ahead(range(3), fetch, 2)) == [(b, b) for b in range(3)]


def test_single_batch_inline_and_errors():
    main = threading.current_thread().name
    assert list(ahead([7], lambda b: (b, threading.current_thread().name))) == [(7, (7, main))]
    assert list(ahead([], lambda b: b)) == []

    def fetch(b):
        if b == 2:
            raise OSError("endpoint gone")
        return b

    with pytest.raises(OSError, match="endpoint gone"):
        list(ahead(range(5), fetch))


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("n", [2, 3, 9])
def test_depth_keeps_that_many_fetches_in_flight_and_no_more(depth, n):
    guard, state = threading.Lock(), {"fetching": 0, "peak": 0, "held": 0, "held_peak": 0}
    # the first window's fetches wait for each other: they must all be in flight at once
    # (a barrier, not a sleep: a loaded machine may start threads late)
    window = threading.Barrier(min(depth, n))

    def fetch(b):
        with guard:
            state["fetching"] += 1
            state["peak"] = max(state["peak"], state["fetching"])
        if b < min(depth, n):
            window.wait(timeout=60)
        time.sleep(0.02)
        with guard:
            state["fetching"] -= 1
            state["held"] += 1  # fetched bytes now held until the reader is done
            state["held_peak"] = max(state["held_peak"], state["held"])
        return b

    got = []
    for b, value in ahead(range(n), fetch, depth):
        assert b == value
        got.append(value)
        time.sleep(0.03)  # decoding: later fetches run meanwhile
        with guard:
            state["held"] -= 1
    assert got == list(range(n))
    assert state["peak"] == min(depth, n)  # the window is used ...
    assert state["held_peak"] <= depth + 1  # ... and bounds what is held


def test_depth_errors_reach_the_reader_in_order():
    def fetch(b):
        if b == 3:
            raise OSError("batch 3 lost")
        return b

    seen = []
    with pytest.raises(OSError, match="batch 3 lost"):
        for b, _ in ahead(range(8), fetch, 4):
            seen.append(b)
    assert seen == [0, 1, 2]


class _RemoteMemory(cs.MemoryStore):
    # reads keep several batches in flight through the fetch path, as S3 does
    capabilities = replace(cs.MemoryStore.capabilities, remote=True, zero_copy_views=False)


def spy_on_read_ahead(monkeypatch) -> tuple[list[int], list[int]]:
    """Two lists that fill as remote reads run: the read-ahead depth of each read, and
    the number of chunks in each batch fetched."""
    depths: list[int] = []
    sizes: list[int] = []
    real = plain.ahead

    def spy(batches, fetch, depth=1):
        depths.append(depth)
        return real(batches, lambda batch: sizes.append(len(batch)) or fetch(batch), depth)

    monkeypatch.setattr(plain, "ahead", spy)
    return depths, sizes


def test_remote_reads_with_several_batches_ahead_are_exact(monkeypatch):
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 8192)  # many small batches
    monkeypatch.setattr(plain, "REMOTE_BATCH_BYTES", 2048)
    x = np.random.default_rng(1).random((120, 333))
    a = cs.create_array(_RemoteMemory(), shape=x.shape, chunks=(8, 16), dtype="f8",
                        compressors=None)
    a[...] = x
    depths, sizes = spy_on_read_ahead(monkeypatch)
    np.testing.assert_array_equal(a[...], x)
    assert depths == [plain.REMOTE_READ_AHEAD] and plain.REMOTE_READ_AHEAD > 1
    # batches of two chunks per decoding thread (REMOTE_BATCH_BYTES is 2 chunks here)
    assert len(sizes) > plain.REMOTE_READ_AHEAD
    assert max(sizes) == 2 * current().pool.threads(True)
    np.testing.assert_array_equal(a[5:117:3, ::-1][:, 7:300:5], x[5:117:3, ::-1][:, 7:300:5])


def test_remote_reads_decode_small_batches_with_many_in_flight(monkeypatch):
    """A remote read fetches batches of two chunks per decoding thread (so decoding
    follows the fetches closely), as many batches ahead as keep REMOTE_READ_REQUESTS
    chunks in flight while what is held stays within READ_BATCH_BYTES."""
    x = np.random.default_rng(2).random((512, 4096))  # 512 chunks of 32 KiB
    a = cs.create_array(_RemoteMemory(), shape=x.shape, chunks=(64, 64), dtype="f8",
                        compressors=None)
    a[...] = x
    chunk = 64 * 64 * 8
    monkeypatch.setattr(plain, "REMOTE_BATCH_BYTES", chunk)  # chunks count as large
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 1000 * chunk)
    monkeypatch.setattr(plain, "REMOTE_READ_REQUESTS", 48)
    per_batch = 2 * current().pool.threads(True)
    depths, sizes = spy_on_read_ahead(monkeypatch)
    np.testing.assert_array_equal(a[...], x)
    assert depths == [max(plain.REMOTE_READ_AHEAD, 48 // per_batch)]
    assert max(sizes) == per_batch and sum(sizes) == 512
    # what is held bounds the depth: at most READ_BATCH_BYTES in batches fetched
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 6 * per_batch * chunk)
    depths.clear()
    np.testing.assert_array_equal(a[...], x)
    assert depths == [max(plain.REMOTE_READ_AHEAD, min(48 // per_batch, 5))]


def test_many_batches_on_a_non_view_store_read_exactly(monkeypatch):
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 4096)  # many batches
    x = np.random.default_rng(0).random((200, 300))
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=x.shape, chunks=(16, 16), dtype="f8", compressors=None)
    a[...] = x
    np.testing.assert_array_equal(a[...], x)
    np.testing.assert_array_equal(a[3:190:7, 5:290:3], x[3:190:7, 5:290:3])  # ranged reads
    np.testing.assert_array_equal(a[7, :], x[7, :])


class _SlowRemote(cs.MemoryStore):
    """A memory store that answers like a remote one: every commit takes 20 ms."""

    capabilities = replace(cs.MemoryStore.capabilities, remote=True)

    def __init__(self):
        super().__init__()
        self.now = self.peak = 0
        self.guard = threading.Lock()

    def commit_many(self, items):
        with self.guard:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(0.02)
            return super().commit_many(items)
        finally:
            with self.guard:
                self.now -= 1


def test_small_writes_to_a_remote_store_commit_concurrently_from_the_start():
    store = _SlowRemote()
    a = cs.create_array(store, shape=(64, 64), chunks=(8, 8), dtype="i2")
    store.peak = 0
    x = np.arange(64 * 64, dtype="i2").reshape(64, 64) + 1
    a[...] = x  # 64 chunks of 128 bytes: no inline probe of the first runs
    assert store.peak > 1
    np.testing.assert_array_equal(a[...], x)
