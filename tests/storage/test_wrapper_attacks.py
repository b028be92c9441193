"""Red team: wrapper stores (``WrapperStore``, ``MetricsStore``, ``LatencyStore``) under
conditional commits of several processes, the decoded-chunk cache seeing writes made
through the inner store and through the wrapper, read-only wrappers, wrappers of
wrappers, and Dask on a process cluster."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkstoreError
from chunkstore.storage import LatencyStore, LocalStore, MemoryStore, MetricsStore
from chunkstore.storage.wrappers import WrapperStore
from tests.multiproc import run_together, start_fork_server


def _wrapped(path, kind="both"):
    inner = LocalStore(path)
    if kind == "metrics":
        return MetricsStore(inner)
    if kind == "latency":
        return LatencyStore(inner, 0.001)
    return LatencyStore(MetricsStore(inner), 0.0005)  # a wrapper around a wrapper


# -- conditional commits of 4 processes through wrappers ------------------------------------
def _writer(store, sharded, proc, start):
    store = pickle.loads(pickle.dumps(store))  # as a worker receives it
    a = cs.open_array(store, mode="r+", cache=0)
    start.wait()
    for r in range(1, 9):
        if sharded:  # process `proc` owns inner chunks proc, proc+4 of the one shard
            for c in (proc, proc + 4):
                a[2 * c:2 * c + 2] = 100 * r + c
            a[2 * proc + 1] = -(100 * r + proc)  # part of an inner chunk
        else:  # one chunk, element `proc` of each row: every write a read-modify-write
            a[:, proc] = 100 * r + proc


@pytest.mark.parametrize("kind", ["metrics", "latency", "both"])
@pytest.mark.parametrize("sharded", [True, False])
def test_four_processes_commit_through_wrappers(tmp_path, kind, sharded):
    path = str(tmp_path / "a")
    store = _wrapped(path, kind)
    if sharded:
        cs.create_array(store, shape=(16,), chunks=(2,), shards=(16,), dtype="i4",
                        fill_value=0)
    else:
        cs.create_array(store, shape=(3, 4), chunks=(3, 4), dtype="i4", fill_value=0)
    run_together(_writer, lambda i: (store, sharded, i))
    got = cs.open_array(LocalStore(path), mode="r")[...]
    if sharded:
        ref = np.repeat(800 + np.arange(8, dtype="i4"), 2)
        ref[2 * np.arange(4) + 1] = -(800 + np.arange(4))
    else:
        ref = np.tile(800 + np.arange(4, dtype="i4"), (3, 1))
    np.testing.assert_array_equal(got, ref)


# -- the decoded-chunk cache ----------------------------------------------------------------
@pytest.mark.parametrize("sharded", [True, False])
@pytest.mark.parametrize("backend", ["local", "memory"])
def test_cache_sees_writes_through_inner_and_wrapper(tmp_path, backend, sharded):
    kwargs = dict(shape=(8, 12), chunks=(2, 3), dtype="i4", fill_value=0)
    if sharded:
        kwargs["shards"] = (4, 6)
    with cs.config.set({"cache.chunk_bytes": 1 << 20}):
        inner = LocalStore(str(tmp_path / "a")) if backend == "local" else MemoryStore()
        wrapped = MetricsStore(LatencyStore(inner, 0.0))
        data = np.arange(96, dtype="i4").reshape(8, 12)
        w = cs.create_array(wrapped, **kwargs)
        w[...] = data
        i = cs.open_array(inner, mode="r+")
        np.testing.assert_array_equal(w[...], data)   # both caches filled
        np.testing.assert_array_equal(i[...], data)
        for step in range(4):
            writer, readers = (i, (w, i)) if step % 2 == 0 else (w, (i, w))
            value = -(step + 1) * data
            sel = [np.s_[...], np.s_[0:4, 0:6], np.s_[1:3, 2:11], np.s_[4:8, 6:12]][step]
            writer[sel] = value[sel]
            data[sel] = value[sel]
            for r in readers:
                np.testing.assert_array_equal(r[...], data, err_msg=f"step {step}")
                np.testing.assert_array_equal(r[1:7, 2:11], data[1:7, 2:11])
        # raw bytes through the inner store (not an array): a chunk deleted
        key = "c/0/0"
        inner.delete(key)
        data[0:(4 if sharded else 2), 0:(6 if sharded else 3)] = 0
        np.testing.assert_array_equal(w[...], data)


# -- read-only wrappers ---------------------------------------------------------------------
def test_read_only_wrappers(tmp_path):
    path = str(tmp_path / "a")
    cs.array(np.arange(16, dtype="i4"), store=LocalStore(path), chunks=(4,))
    for store in (MetricsStore(LocalStore(path, read_only=True)),
                  LatencyStore(MetricsStore(LocalStore(path)), 0.0).with_read_only(True)):
        assert store.read_only
        a = cs.open_array(store, mode="r")
        np.testing.assert_array_equal(a[...], np.arange(16))
        with pytest.raises((ChunkstoreError, PermissionError, ValueError, OSError)):
            a[0:4] = 7
        with pytest.raises((ChunkstoreError, PermissionError, ValueError, OSError)):
            store.set("c/0", b"x")
        with pytest.raises((ChunkstoreError, PermissionError, ValueError, OSError)):
            store.commit_many([("c/0", None, None)])
        with pytest.raises((ChunkstoreError, PermissionError, ValueError, OSError)):
            cs.open_array(store, mode="r+")[0:4] = 7
        back = pickle.loads(pickle.dumps(store))
        assert back.read_only and type(back) is type(store)
        writable = store.with_read_only(False)
        assert not writable.read_only and type(writable) is type(store)
    np.testing.assert_array_equal(cs.open_array(LocalStore(path), mode="r")[...],
                                  np.arange(16))
    # a read-only array opened through a writable wrapper
    a = cs.open_array(MetricsStore(LocalStore(path)), mode="r")
    with pytest.raises((ChunkstoreError, PermissionError, ValueError, OSError)):
        a[0:4] = 7
    np.testing.assert_array_equal(cs.open_array(LocalStore(path), mode="r")[...],
                                  np.arange(16))


def test_wrapper_of_wrapper_keeps_identity_and_counts(tmp_path):
    inner = LocalStore(str(tmp_path / "a"))
    metrics = MetricsStore(inner)
    outer = LatencyStore(MetricsStore(metrics), 0.0)
    assert outer.location() == inner.location()
    assert outer.capabilities == inner.capabilities
    a = cs.create_array(outer, shape=(8,), chunks=(2,), shards=(4,), dtype="f8", fill_value=0)
    a[...] = np.arange(8.0)
    metrics.reset()
    np.testing.assert_array_equal(cs.open_array(outer, mode="r", cache=0)[...], np.arange(8.0))
    assert metrics.requests > 0 and metrics.bytes_read > 0
    clone = pickle.loads(pickle.dumps(outer))
    assert type(clone.inner) is MetricsStore and type(clone.inner.inner) is MetricsStore
    np.testing.assert_array_equal(cs.open_array(clone, mode="r")[...], np.arange(8.0))
    assert isinstance(clone, WrapperStore) and clone.seconds == 0.0


def test_metrics_count_what_a_read_only_array_does(tmp_path):
    """BUG (fixed): ``open_array(metrics, mode="r")`` reads through
    ``metrics.with_read_only(True)``, a new MetricsStore with counters of its own: the
    store the user holds counted nothing. A read-only view now shares the counters."""
    metrics = MetricsStore(LocalStore(str(tmp_path / "a")))
    cs.array(np.arange(8.0), store=metrics, chunks=(2,))
    metrics.reset()
    np.testing.assert_array_equal(cs.open_array(metrics, mode="r", cache=0)[...],
                                  np.arange(8.0))
    assert metrics.requests > 0 and metrics.bytes_read > 0
    ro = metrics.with_read_only(True)
    assert ro.read_only and not metrics.read_only
    before = metrics.requests
    ro.get("zarr.json")
    assert metrics.requests == ro.requests == before + 1
    metrics.reset()
    assert ro.requests == 0 and ro.bytes_read == 0
    fresh = pickle.loads(pickle.dumps(metrics))  # another process counts its own calls
    fresh.get("zarr.json")
    assert fresh.requests == 1 and metrics.requests == 0


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_metrics_count_the_bytes_of_views(tmp_path, backend):
    """BUG (fixed): ``bytes_read`` counted 0 for LocalStore's views (memory maps): only
    bytes and memoryviews were measured. Any buffer now counts, and a map stays closable."""
    inner = LocalStore(str(tmp_path / "a")) if backend == "local" else MemoryStore()
    m = MetricsStore(inner)
    m.set("k", b"x" * 100_000)
    m.set("j", b"")
    m.reset()
    views = m.get_views(["k", "j", "missing"])
    assert m.bytes_read == 100_000
    assert bytes(views[0]) == b"x" * 100_000
    if hasattr(views[0], "close"):
        views[0].close()  # no export of the map left behind by the counting
    m.reset()
    a = cs.create_array(m, shape=(1000,), chunks=(100,), dtype="i8", fill_value=0,
                        compressors=None)
    a[...] = np.arange(1000)
    m.reset()
    np.testing.assert_array_equal(cs.open_array(m, mode="r", cache=0)[...], np.arange(1000))
    assert m.bytes_read >= 8000


@pytest.mark.parametrize("wrap", [lambda s: s, MetricsStore, lambda s: LatencyStore(
    MetricsStore(s), 0.0)])
def test_enclosing_consolidated_copy_kept_current_through_wrappers(tmp_path, wrap):
    """BUG (fixed): a member array of a consolidated group, opened through a wrapper of a
    LocalStore rooted at the member, resized: the group's consolidated copy was not
    updated (the enclosing-copies lookup wanted a LocalStore itself), so the group showed
    the old shape (4 of the 8 elements written unseen)."""
    where = str(tmp_path / "g.zarr")
    g = cs.open_group(where, mode="w")
    g.create_array("arr", shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    cs.consolidate_metadata(where)
    a = cs.open_array(wrap(LocalStore(where + "/arr")), mode="r+")
    a.resize((8,))
    a[...] = np.arange(8, dtype="i4")
    seen = cs.open_group(where, mode="r")["arr"]
    assert seen.shape == (8,)
    np.testing.assert_array_equal(seen[...], np.arange(8))


@pytest.mark.parametrize("wrap", [MetricsStore, lambda s: LatencyStore(s, 0.0),
                                  lambda s: LatencyStore(MetricsStore(s), 0.0)])
def test_dask_names_of_arrays_in_two_wrapped_memory_stores_differ(wrap):
    """Two wrapped memory stores of the same shape: distinct Dask names (one graph of
    both must not merge their chunks)."""
    import chunkstore.dask as csd

    stores = []
    for v in (1, 2):
        s = MemoryStore()
        cs.create_array(s, shape=(4,), chunks=(2,), dtype="i4", fill_value=0)[...] = v
        stores.append(wrap(s))
    x, y = (csd.from_store(s) for s in stores)
    assert x.name != y.name
    np.testing.assert_array_equal((x * 10 + y).compute(), np.full(4, 12))


# -- Dask on a process cluster --------------------------------------------------------------
def test_dask_from_and_to_store_with_a_wrapped_local_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import chunkstore.dask as csd

    src = _wrapped(str(tmp_path / "src"))
    data = np.arange(40 * 30, dtype="f4").reshape(40, 30)
    cs.array(data, store=src, chunks=(5, 6), shards=(10, 12))
    dst = MetricsStore(LocalStore(str(tmp_path / "dst")))
    # worker processes forked from the suite's fork server (chunkstore imported), not
    # spawned: each spawned worker spent seconds importing before its first task
    start_fork_server()
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        x = csd.from_store(src)
        np.testing.assert_array_equal(x.compute(), data)
        csd.to_store(x * 2, dst, chunks=(4, 7), shards=(8, 14))
        # a region of an existing array, unaligned with its shards
        csd.to_store(da.from_array(-data[3:37, 5:29], chunks=(7, 9)), src,
                     region=(slice(3, 37), slice(5, 29)))
    ref = data.copy()
    ref[3:37, 5:29] *= -1
    np.testing.assert_array_equal(cs.open_array(LocalStore(str(tmp_path / "src")),
                                                mode="r")[...], ref)
    np.testing.assert_array_equal(cs.open_array(LocalStore(str(tmp_path / "dst")),
                                                mode="r")[...], data * 2)
