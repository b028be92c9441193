"""Red team round 5: the buffer pool of Dask copy tasks (``chunkstore/runtime/buffers.py``).

A block is reused by the next task only when nothing else refers to it. Attacks: stores
that keep (without copying) what they are asked to write — a Store subclass keeping the
memoryview, a lazily-copying store, a dict store — uncompressed chunks (whose encoding
is a view of the block), v2 and v3, F order, structured dtypes, sharded targets, a
rechunk with an intermediate, the threaded scheduler with many threads, an exception in
the middle of a task, and a forked child. Every result is compared exactly with NumPy.
"""

from __future__ import annotations

import os
import threading

import dask
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.dask import rechunk, transpose
from chunkstore.runtime import current

MiB = 1 << 20


TAKEN = [0]


@pytest.fixture(autouse=True)
def _empty_pool(monkeypatch):
    monkeypatch.setattr(current().buffers, "idle_seconds", 60)  # the pool stays between the stages
    monkeypatch.setattr(current().buffers, "min_bytes", 4096)  # small test blocks are pooled too
    real_take = current().buffers._take

    def take(nbytes):
        TAKEN[0] += 1
        return real_take(nbytes)

    monkeypatch.setattr(current().buffers, "_take", take)
    TAKEN[0] = 0
    current().buffers.release()
    yield
    current().buffers.release()


class KeepingStore(cs.MemoryStore):
    """A user store that keeps the very object it is given (no copy): a view of a
    pooled block, for uncompressed chunks."""

    def set(self, key, value):
        self._check_writable(key)
        with self._lock:
            self._data[key] = value

    def commit_many(self, items):
        done = []
        for key, value, _generation in items:
            self._check_writable(key)
            with self._lock:
                if value is None:
                    self._data.pop(key, None)
                else:
                    self._data[key] = value
            done.append(True)
        return done


class LazyStore(KeepingStore):
    """Keeps the value and copies it only when it is read (write-behind)."""

    def _value(self, key, max_bytes):
        value = self._data.get(key)
        if value is not None and not isinstance(value, bytes):
            self._data[key] = value = bytes(value)
        return super()._value(key, max_bytes)


def _source(shape, dtype, chunks, **kw):
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    if dt.names:
        data = np.zeros(shape, dt)
        for i, name in enumerate(dt.names):
            data[name] = rng.integers(0, 100, shape) + i
    else:
        data = rng.integers(-1000, 1000, shape).astype(dt)
    src = cs.create_array(cs.MemoryStore(), shape=shape, chunks=chunks, dtype=dt, **kw)
    src[...] = data
    return src, data


def _check(got, want):
    assert got.shape == want.shape
    if want.dtype.names:
        for name in want.dtype.names:
            np.testing.assert_array_equal(got[name], want[name])
    else:
        np.testing.assert_array_equal(got, want)


CASES = {
    "v3-raw": dict(dtype="f4", kw=dict(compressors=None)),
    "v2-raw": dict(dtype="i8", kw=dict(compressors=None, zarr_format=2)),
    "v2-raw-F": dict(dtype="i4", kw=dict(compressors=None, zarr_format=2, order="F")),
    "v3-raw-F": dict(dtype="u2", kw=dict(compressors=None, order="F")),
    "structured": dict(dtype=[("a", "<i4"), ("b", "<f8")], kw=dict(compressors=None)),
    "v3-zstd": dict(dtype="f8", kw=dict()),
}


@pytest.mark.parametrize("store_kind", ["keeping", "lazy", "dict"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_transpose_into_stores_that_keep_what_they_are_given(case, store_kind):
    spec = CASES[case]
    shape = (64, 96, 48)
    src, data = _source(shape, spec["dtype"], (64, 96, 8), **spec["kw"])
    store = {"keeping": KeepingStore, "lazy": LazyStore}.get(store_kind, dict)()
    with dask.config.set(scheduler="threads", num_workers=6):
        out = transpose(src, (2, 1, 0), store, max_mem="4MB", **spec["kw"])
    _check(out[...], data.transpose(2, 1, 0))
    assert TAKEN[0] > 0  # the tasks did borrow from the pool
    again = cs.open_array(store if store_kind == "dict" else out.store, mode="r")
    _check(again[...], data.transpose(2, 1, 0))


@pytest.mark.parametrize("store_kind", ["keeping", "lazy"])
@pytest.mark.parametrize("case", ["v3-raw", "v2-raw-F", "structured"])
def test_rechunk_with_an_intermediate_into_keeping_stores(case, store_kind):
    spec = CASES[case]
    shape = (128, 128, 32)
    src, data = _source(shape, spec["dtype"], (128, 128, 2), **spec["kw"])
    cls = {"keeping": KeepingStore, "lazy": LazyStore}[store_kind]
    target, temp = cls(), cls()
    with dask.config.set(scheduler="threads", num_workers=8):
        plan = rechunk(src, (2, 128, 32), target, max_mem="2MB", temp_store=temp,
                       **spec["kw"])
        out = plan.execute()
    assert TAKEN[0] > 0
    _check(out[...], data)
    _check(cs.open_array(target, mode="r")[...], data)


@pytest.mark.parametrize("compressors", [None, "auto"])
def test_transpose_into_a_sharded_target_is_exact(compressors):
    shape = (64, 64, 64)
    src, data = _source(shape, "i4", (64, 64, 8), compressors=None)
    store = KeepingStore()
    with dask.config.set(scheduler="threads", num_workers=6):
        out = transpose(src, (2, 0, 1), store, chunks=(8, 16, 64), shards=(16, 32, 64),
                        max_mem="4MB", compressors=compressors)
    assert TAKEN[0] > 0
    _check(out[...], data.transpose(2, 0, 1))


def test_an_exception_mid_task_neither_corrupts_nor_leaks_a_block(monkeypatch):
    """A task whose write fails halfway: the block it borrowed is not handed to the next
    task while the failing task's traceback may still show it, and a rerun is exact."""
    shape = (64, 64, 64)
    src, data = _source(shape, "f8", (64, 64, 8), compressors=None)
    store = KeepingStore()
    real = KeepingStore.commit_many
    calls = {"n": 0}

    def flaky(self, items):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (injected)")
        return real(self, items)

    monkeypatch.setattr(KeepingStore, "commit_many", flaky)
    with dask.config.set(scheduler="sync"):
        with pytest.raises(OSError, match="injected"):
            transpose(src, (2, 1, 0), store, max_mem="4MB", compressors=None)
    with dask.config.set(scheduler="threads", num_workers=4):
        out = transpose(src, (2, 1, 0), store, max_mem="4MB", compressors=None,
                        overwrite=True)
    assert TAKEN[0] > 0
    _check(out[...], data.transpose(2, 1, 0))


def test_a_block_still_viewed_by_a_store_is_never_lent_again():
    """The pool itself: a view kept of a given-back block must keep its bytes while the
    next borrowers fill their blocks (several threads)."""
    kept = []
    with current().buffers.retaining(64 * MiB):
        a = current().buffers.borrow((1024, 1024), "f4")
        a[...] = 3.0
        kept.append(memoryview(a[:, ::2]) if False else a[1:].reshape(-1)[::3])
        current().buffers.give_back(a)
        del a

        def fill(v):
            with current().buffers.retaining(8 * MiB):
                b = current().buffers.borrow((1024, 1024), "f4")
                b[...] = v
                current().buffers.give_back(b)
                del b

        threads = [threading.Thread(target=fill, args=(float(-i),)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert (kept[0] == 3.0).all()


def test_structured_and_odd_itemsize_blocks_are_aligned_and_exact():
    with current().buffers.retaining(32 * MiB):
        for dtype in ("V3", [("a", "u1"), ("b", "<f8")], "c16", "U3", "S5", "M8[s]"):
            dt = np.dtype(dtype)
            n = (2 * MiB) // dt.itemsize + 1
            b = current().buffers.borrow((n,), dt)
            assert b.dtype == dt and b.shape == (n,) and b.flags.c_contiguous
            assert b.ctypes.data % min(dt.alignment, 16) == 0
            b[...] = np.zeros(1, dt)
            current().buffers.give_back(b)
            del b


def test_object_dtype_is_never_pooled():
    with current().buffers.retaining(64 * MiB):
        b = current().buffers.borrow((MiB,), object)
        assert b.base is None and b.dtype == object
        current().buffers.give_back(b)
    assert current().buffers.pooled_bytes() == 0


def test_a_forked_child_of_a_busy_parent_starts_clean():
    """Fork while another thread holds the pool's lock and a lent block."""
    holding, release_it = threading.Event(), threading.Event()

    def busy():
        with current().buffers.retaining(16 * MiB):
            a = current().buffers.borrow((2 * MiB,), "u1")
            with current().buffers._lock:
                holding.set()
                release_it.wait(10)
            current().buffers.give_back(a)
            del a

    t = threading.Thread(target=busy)
    t.start()
    holding.wait(10)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            pool = current().buffers
            ok = not pool.lent_bytes() and not pool.running_tasks() and pool.pooled_bytes() == 0
            with current().buffers.retaining(8 * MiB):
                x = current().buffers.borrow((2 * MiB,), "u1")
                x[...] = 1
                current().buffers.give_back(x)
                del x
            ok = ok and current().buffers.pooled_bytes() == 2 * MiB
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    release_it.set()
    t.join()
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 8) == b"1" and status == 0
