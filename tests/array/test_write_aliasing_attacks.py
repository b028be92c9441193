"""Attacks on writes whose value or shape moves under them: values that read the array
being written (another handle, a lazy view, a dask array), a resize or append by another
thread while a write converts its value, readers during writes, and four processes
rewriting the same chunks. Each asserts the exact final content."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import chunkstore as cs

from ..multiproc import run_together
from ..write_checks import assert_same as _assert_same
from ..write_checks import store as _store

# --------------------------------------------------------------------------------------
# values that read their target; resizes, reads and processes during writes


@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_self_aliasing_values(tmp_path, store_kind):
    a = cs.create_array(_store(store_kind, tmp_path), shape=(1000,), chunks=(7,), dtype="i4",
                        fill_value=0)
    ref = np.arange(1000, dtype="i4")
    a[:] = ref
    a[1:] = a[:-1]
    ref[1:] = ref[:-1].copy()
    _assert_same(a[:], ref, "a[1:] = a[:-1]")
    a[:-3] = a[3:]
    ref[:-3] = ref[3:].copy()
    _assert_same(a[:], ref, "a[:-3] = a[3:]")
    a[::-1] = a[:]
    ref[::-1] = ref.copy()
    _assert_same(a[:], ref, "reverse")
    # a NumPy value overlapping itself (a view of a buffer that the write must not alias)
    buf = np.arange(2000, dtype="i4")
    view = buf[500:1500]
    a[:] = view
    buf[:] = -1  # mutating the caller's buffer after the write must not change the store
    _assert_same(a[:], np.arange(500, 1500, dtype="i4"), "caller buffer mutated after write")
    # a whole Array as value (block by block copy) with the same target
    b = cs.open_array(a.store, mode="r+")
    a[...] = b
    _assert_same(a[:], np.arange(500, 1500, dtype="i4"), "a[...] = same array")


class _ShiftedView:
    """A lazy array-like reading ``a[lo:hi]`` on slicing (like an h5py dataset, an
    xarray lazily indexed array or a dask array built on ``a``)."""

    def __init__(self, a, lo, hi):
        self.a, self.lo, self.hi = a, lo, hi
        self.shape, self.dtype = (hi - lo,), a.dtype

    def __getitem__(self, sel):
        (s,) = sel if isinstance(sel, tuple) else (sel,)
        start, stop, _ = s.indices(self.shape[0])
        return self.a[self.lo + start:self.lo + stop]

    def __array__(self, dtype=None, copy=None):
        return self.a[self.lo:self.hi]


# A lazy value that reads the target was copied block by block, each block read after
# the previous one was written: an overlapping shift smeared data (before array_copy).
# NumPy (and zarr-python, which converts the value first) give the shifted copy. Blocks
# are COPY_BLOCK_BYTES (256 MiB); shrunk here so the test is small.
def test_lazy_self_aliasing_value(tmp_path, monkeypatch):
    from chunkstore.io import copy as copy_mod
    monkeypatch.setattr(copy_mod, "COPY_BLOCK_BYTES", 64)
    a = cs.create_array(str(tmp_path / "s.zarr"), shape=(100,), chunks=(8,), dtype="i8",
                        fill_value=0)
    ref = np.arange(100, dtype="i8")
    a[:] = ref
    a[1:] = _ShiftedView(a, 0, 99)
    ref[1:] = ref[:-1].copy()
    _assert_same(a[:], ref, "a[1:] = lazy a[:-1]")


# The same through dask (cs.dask.from_store), found in the graph before any block is read.
def test_dask_self_aliasing_value(tmp_path, monkeypatch):
    pytest.importorskip("dask")
    from chunkstore.io import copy as copy_mod
    monkeypatch.setattr(copy_mod, "COPY_BLOCK_BYTES", 64)
    import dask
    a = cs.create_array(str(tmp_path / "d.zarr"), shape=(100,), chunks=(8,), dtype="i8",
                        fill_value=0)
    ref = np.arange(100, dtype="i8")
    a[:] = ref
    with dask.config.set(scheduler="synchronous"):
        a[1:] = cs.dask.from_store(a)[:-1]
    ref[1:] = ref[:-1].copy()
    _assert_same(a[:], ref, "a[1:] = dask a[:-1]")


class _AppendWhileConverting:
    """A value whose conversion lets 'another thread' append to the target first
    (deterministic stand-in for the race in ``test_write_races_append_threads``)."""

    def __init__(self, a, n, extra):
        self.a, self.n, self.extra, self.done = a, n, extra, False

    def __array__(self, dtype=None, copy=None):
        if not self.done:
            self.done = True
            self.a.append(self.extra)
        return np.ones(self.n, dtype or "i4")


# A write built its indexer from the shape before converting the value, then took the
# engine rebuilt for the shape after an append: the old edge chunk looked wholly
# overwritten in the new layout and was replaced without reading the appended elements.
@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_write_during_append_keeps_appended(tmp_path, store_kind):
    a = cs.create_array(_store(store_kind, tmp_path), shape=(10,), chunks=(4,), dtype="i4",
                        fill_value=0)
    a[0:10] = _AppendWhileConverting(a, 10, np.full(2, 9, "i4"))
    ref = np.array([1] * 10 + [9, 9], "i4")
    assert a.shape == (12,)
    _assert_same(a[:], ref, "append during write")


class _SlowValue:
    def __init__(self, n):
        self.n = n

    def __array__(self, dtype=None, copy=None):
        time.sleep(0.002)
        return np.ones(self.n, dtype or "i4")


# The same race with real threads (one thread writes a[0:10] with a value that takes
# 2 ms to convert, another appends two elements): appended data was lost in ~all trials.
def test_write_races_append_threads():
    lost = 0
    for _ in range(10):
        a = cs.create_array(cs.MemoryStore(), shape=(10,), chunks=(4,), dtype="i4",
                            fill_value=0)
        stop = threading.Event()

        def w(a=a, stop=stop):
            while not stop.is_set():
                a[0:10] = _SlowValue(10)

        t = threading.Thread(target=w)
        t.start()
        time.sleep(0.005)
        a.append(np.full(2, 9, "i4"))
        time.sleep(0.01)
        stop.set()
        t.join()
        lost += not (a[10:12] == 9).all()
    assert lost == 0, f"appended elements lost in {lost} of 10 trials"


class _ShrinkWhileConverting:
    def __init__(self, a, n, new_shape):
        self.a, self.n, self.new_shape, self.done = a, n, new_shape, False

    def __array__(self, dtype=None, copy=None):
        if not self.done:
            self.done = True
            self.a.resize(self.new_shape)
        return np.full(self.n, 5, dtype or "i4")


# A shrink during a write: the write (indexer of the old, larger shape) landed beyond the
# new edge after resize cleared it, so a later growth showed stale elements instead of
# fill_value (README: "growing again shows fill_value, never stale data").
def test_write_during_shrink_leaves_no_stale_data(tmp_path):
    a = cs.create_array(str(tmp_path / "r.zarr"), shape=(20,), chunks=(4,), dtype="i4",
                        fill_value=0)
    try:
        a[0:20] = _ShrinkWhileConverting(a, 20, (6,))
    except (IndexError, ValueError):
        pass  # refusing the now out-of-bounds write is fine too
    a.resize(20)
    got = a[:]
    assert (got[6:] == 0).all(), f"stale data after shrink+grow: {got}"


def test_concurrent_resize_disjoint_region(tmp_path):
    """A writer of a fixed interior region while another thread grows and shrinks the
    array (never below the region): the region ends with the writer's last value."""
    a = cs.create_array(str(tmp_path / "g.zarr"), shape=(40, 40), chunks=(3, 3),
                        dtype="i4", fill_value=0)
    stop = threading.Event()
    errors = []

    def resizer():
        try:
            k = 0
            while not stop.is_set():
                a.resize((40 + k % 7, 40 + (k * 3) % 5))
                k += 1
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=resizer)
    t.start()
    try:
        for v in range(1, 30):
            a[2:29, 1:31] = np.full((27, 30), v, "i4")
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    a.resize((40, 40))
    ref = np.zeros((40, 40), "i4")
    ref[2:29, 1:31] = 29
    _assert_same(a[...], ref, "write while resizing")


@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_reads_during_writes_see_whole_chunks(tmp_path, store_kind):
    """Readers during whole-array writes of constant versions see, per chunk, one
    version (chunks are replaced atomically), and the final content is the last one."""
    a = cs.create_array(_store(store_kind, tmp_path), shape=(60, 60), chunks=(5, 5),
                        dtype="i4", fill_value=0)
    stop = threading.Event()
    problems = []

    def reader():
        while not stop.is_set():
            d = a[...]
            blocks = d.reshape(12, 5, 12, 5).transpose(0, 2, 1, 3).reshape(144, 25)
            if not (blocks == blocks[:, :1]).all():
                problems.append("torn chunk seen by a reader")
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for v in range(1, 40):
            a[...] = v
    finally:
        stop.set()
        t.join()
    assert not problems, problems
    _assert_same(a[...], np.full((60, 60), 39, "i4"), "final")


@pytest.mark.parametrize("store_kind,shards", [("memory", None), ("local", None),
                                               ("local", (10, 10)), ("memory", (10, 10))])
def test_cached_reads_during_partial_writes(tmp_path, store_kind, shards):
    """With the decoded-chunk cache on, a reader thread racing unaligned writes must not
    leave a stale entry behind: after the writer is done every read shows the last write."""
    a = cs.create_array(_store(store_kind, tmp_path), shape=(40, 40), chunks=(5, 5),
                        shards=shards, dtype="i4", fill_value=0, cache="64MiB")
    r = cs.open_array(a.store, mode="r", cache="64MiB")
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            r[...]
            a[3:17, 3:17]

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    ref = np.zeros((40, 40), "i4")
    try:
        for v in range(1, 40):
            sel = np.s_[v % 7:40 - v % 5, (v * 3) % 11::2]
            a[sel] = v
            ref[sel] = v
    finally:
        stop.set()
        for t in threads:
            t.join()
    _assert_same(a[...], ref, "writer's array")
    _assert_same(r[...], ref, "reader's array")
    _assert_same(cs.open_array(a.store, mode="r", cache=0)[...], ref, "uncached")


def _proc_overlap(path, use_sync, lock_dir, p, start):
    import chunkstore as cs
    sync = cs.ProcessSynchronizer(lock_dir) if use_sync else None
    a = cs.open_array(path, mode="r+", synchronizer=sync)
    start.wait()
    for rep in range(4):
        a[1:-1, 1:-1] = p * 100 + rep  # every writer over the same unaligned region


@pytest.mark.parametrize("use_sync,shards", [(False, None), (True, None), (False, (8, 8))])
def test_four_processes_overlapping_chunks_stay_whole(tmp_path, use_sync, shards):
    """Overlapping unaligned writers: the winner may differ per chunk, but inside a
    chunk every element comes from one write (a unit is never a mix of two)."""
    path = str(tmp_path / "o.zarr")
    cs.create_array(path, shape=(30, 30), chunks=(4, 4), shards=shards, dtype="i4",
                    fill_value=0)
    lock_dir = str(tmp_path / "locks")
    run_together(_proc_overlap, lambda p: (path, use_sync, lock_dir, p), n=4, timeout=60)
    got = cs.open_array(path, mode="r")[...]
    assert (got[0] == 0).all() and (got[-1] == 0).all()
    assert (got[:, 0] == 0).all() and (got[:, -1] == 0).all()
    inner = got[1:-1, 1:-1]
    assert (inner % 100 == 3).all(), "a writer's last write is missing somewhere"
    for i in range(0, 30, 4):
        for j in range(0, 30, 4):
            block = got[max(i, 1):min(i + 4, 29), max(j, 1):min(j + 4, 29)]
            assert len(np.unique(block)) == 1, f"chunk {(i // 4, j // 4)} mixed: {block}"
