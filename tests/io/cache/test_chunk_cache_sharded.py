"""Sharded arrays in the decoded-chunk cache (``chunk_cache`` + ``inner_cache``): inner
chunks kept under their shard's key and number, served without reading the store,
never stale after a write through chunkstore, a store object's own ``set``, a foreign
writer renaming a new shard over the key, or the node's deletion / re-creation.

Every step compares the exact content with NumPy."""

from __future__ import annotations

import os
import shutil
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache
from chunkstore.storage import LocalStore
from tests.cache_settle import settle

SHAPE, CHUNKS, SHARDS = (64, 64), (8, 8), (32, 32)  # 16 inner chunks a shard, 4 shards
INNER = int(np.prod(SHARDS) // np.prod(CHUNKS))


class CountingMemory(cs.MemoryStore):
    """Counts every read call (what a cache hit avoids)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = 0

    def get_ranges(self, requests, *args, **kwargs):
        self.reads += 1
        return super().get_ranges(requests, *args, **kwargs)

    def get_versioned_ranges(self, requests):
        self.reads += 1
        return super().get_versioned_ranges(requests)

    def get_many(self, keys, *args, **kwargs):
        self.reads += 1
        return super().get_many(keys, *args, **kwargs)


class CountingLocal(LocalStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = 0

    def get_ranges(self, requests, *args, **kwargs):
        self.reads += 1
        return super().get_ranges(requests, *args, **kwargs)

    def get_many(self, keys, *args, **kwargs):
        self.reads += 1
        return super().get_many(keys, *args, **kwargs)


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


def _data(seed=0, dtype="f8"):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(SHAPE) * 100).round(1).astype(dtype)


def _store(kind, tmp_path):
    return CountingMemory() if kind == "memory" else CountingLocal(str(tmp_path / "s.zarr"))


def _array(store, data, compressors="auto", **kw):
    return cs.array(data, store=store, chunks=CHUNKS, shards=SHARDS, compressors=compressors,
                    **kw)


def _entries(cache, key):
    """The inner numbers ``cache`` holds for the shard ``key`` (any place)."""
    with cache._lru._lock:
        return sorted(k[2] for k in cache._lru._data if len(k) == 3 and k[1].endswith(key))


KINDS = ["memory", "local"]
REGION = (slice(3, 40), slice(5, 20))  # 5 x 3 inner chunks over two shards


def test_off_by_default():
    assert cs.config.get("cache.chunk_bytes") == 0
    data = _data()
    a = _array(CountingMemory(), data)
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(a[:], data)
    assert len(chunk_cache.shared()) == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("compressors", [None, "auto"], ids=["raw", "compressed"])
def test_hits_are_served_without_reading_the_store(tmp_path, kind, compressors):
    data = _data()
    store = _store(kind, tmp_path)
    a = _array(store, data, compressors)
    settle(store)  # files changed within their timestamp window are not kept
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[REGION], data[REGION])
        assert len(chunk_cache.shared()) == 15
        n = store.reads
        for _ in range(3):
            np.testing.assert_array_equal(a[REGION], data[REGION])
            np.testing.assert_array_equal(a[7, 17], data[7, 17])
            np.testing.assert_array_equal(a[(slice(4, 30, 3), [6, 9, 18])],
                                          data[4:30:3][:, [6, 9, 18]])
        assert store.reads == n  # all hits: not one read call
        # every array object on the data shares the entries (another object, another root)
        b = cs.open_array(store, mode="r")
        np.testing.assert_array_equal(b[REGION], data[REGION])
        assert store.reads == n
        if kind == "local":
            c = cs.open_array(str(tmp_path / "s.zarr"), mode="r")
            np.testing.assert_array_equal(c[REGION], data[REGION])
            assert len(chunk_cache.shared()) == 15
        # a bigger read reads just what it misses
        np.testing.assert_array_equal(a[:], data)
        assert len(chunk_cache.shared()) == 64
        n = store.reads
        np.testing.assert_array_equal(a[:], data)
        assert store.reads == n


def test_missing_shards_and_empty_inner_chunks_are_cached_as_fill():
    store = CountingMemory()
    a = cs.create_array(store, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="i4",
                        fill_value=7)
    a[0, 0] = 1  # shard (0, 0) stored with one inner chunk; the rest are empty / missing
    expected = np.full(SHAPE, 7, "i4")
    expected[0, 0] = 1
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], expected)
        assert len(chunk_cache.shared()) == 64
        n = store.reads
        np.testing.assert_array_equal(a[:], expected)
        assert store.reads == n
        a[40, 40] = 2  # a missing shard written: its FILL entries go
        a[9, 9] = 3  # an empty inner chunk of a stored shard written
        expected[40, 40], expected[9, 9] = 2, 3
        np.testing.assert_array_equal(a[:], expected)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("other_cache", [None, 0, "1MiB"], ids=["shared", "off", "private"])
def test_writes_through_another_array_object(tmp_path, kind, other_cache):
    data = _data()
    store = _store(kind, tmp_path)
    a = _array(store, data, cache=ChunkCache("4MiB"))
    b = cs.open_array(store, mode="r+", cache=other_cache)
    settle(store, a._engine.io_of().cache)  # files changed within their window are not kept
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        np.testing.assert_array_equal(b[:], data)
        b[10:12, 3:5] = -1.0  # one inner chunk: a partial write of shard (0, 0)
        data[10:12, 3:5] = -1.0
        key = a.chunk_key((0, 0))
        assert _entries(a._engine.io_of().cache, key) == []  # the whole shard's entries went
        assert _entries(a._engine.io_of().cache, a.chunk_key((0, 4))) == list(range(INNER))
        np.testing.assert_array_equal(a[:], data)
        b[32:64, 32:64] = 5.0  # a whole shard
        data[32:64, 32:64] = 5.0
        np.testing.assert_array_equal(a[:], data)
        b[:32, :32] = 0.0  # all fill: the shard is deleted
        data[:32, :32] = 0.0
        np.testing.assert_array_equal(a[:], data)
        np.testing.assert_array_equal(b[:], data)
        b.resize(20, 20)  # shards outside deleted, the cut one cleared
        b.resize(64, 64)
        expected = np.zeros(SHAPE)
        expected[:20, :20] = data[:20, :20]
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(b[:], expected)


def test_writes_through_the_same_array_object_many_ways():
    data = _data(dtype="i8")
    a = _array(CountingMemory(), data)
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        for step, (sel, value) in enumerate([
                ((slice(0, 64, 5), slice(1, 64, 7)), -3),  # strided: many partial shards
                ((slice(30, 34), slice(None)), 11),  # across the shard boundary
                ((5, 60), 99),
                ((slice(None), slice(None)), 0)]):  # everything fill: shards deleted
            np.testing.assert_array_equal(a[:], data)
            a[sel] = value
            data[sel] = value
            np.testing.assert_array_equal(a[:], data, err_msg=f"step {step}")
        a.set_orthogonal_selection(([1, 40], [2, 33]), 8)
        data[np.ix_([1, 40], [2, 33])] = 8
        np.testing.assert_array_equal(a[:], data)
        a.write_chunk((1, 1), np.full(CHUNKS, 4))
        data[8:16, 8:16] = 4
        np.testing.assert_array_equal(a[:], data)


@pytest.mark.parametrize("kind", KINDS)
def test_writes_by_the_store_objects_own_set(tmp_path, kind):
    data = _data()
    store = _store(kind, tmp_path)
    a = _array(store, data)
    other = _array(cs.MemoryStore(), data * 2)
    key = a.chunk_key((0, 0))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        store.set(key, other.store.get(key))  # checked per hit: the stored value changed
        data[:32, :32] *= 2
        np.testing.assert_array_equal(a[:32, :8], data[:32, :8])
        np.testing.assert_array_equal(a[:], data)
        store.delete(key)
        data[:32, :32] = 0
        np.testing.assert_array_equal(a[:], data)


def test_writes_by_an_fsspec_store_objects_own_set():
    """fsspec memory:// is not revalidated per hit: its own set / delete tell the cache
    (``Store._notify_written``)."""
    root = f"memory://shcache-{uuid.uuid4().hex[:12]}"
    data = _data()
    a = _array(root, data)
    other = _array(cs.MemoryStore(), data + 1)
    key = a.chunk_key((4, 0))  # inner chunk coordinates: shard (1, 0)
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        n = len(chunk_cache.shared())
        np.testing.assert_array_equal(a[:], data)
        assert len(chunk_cache.shared()) == n == 64
        a.store.set(key, other.store.get(key))
        data[32:, :32] += 1
        np.testing.assert_array_equal(a[:], data)
        a.store.delete_many([key])
        data[32:, :32] = 0
        np.testing.assert_array_equal(a[:], data)
        a.store.set(key, other.store.get(key))
        data[32:, :32] = other[32:, :32]
        np.testing.assert_array_equal(a[:], data)
        a.store.delete_prefix("c")
        np.testing.assert_array_equal(a[:], np.zeros(SHAPE))


def _copy_shard_over(src_root, dst_root, key):
    """A foreign writer: a new shard file renamed over the key (what Zarr writers do)."""
    tmp = os.path.join(dst_root, key + ".foreign")
    shutil.copyfile(os.path.join(src_root, key), tmp)
    os.replace(tmp, os.path.join(dst_root, key))


@pytest.mark.parametrize("compressors", [None, "auto"], ids=["raw", "compressed"])
def test_local_shard_renamed_over_the_key_is_seen(tmp_path, compressors):
    path, other = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    data = _data()
    a = _array(path, data, compressors)
    b = _array(other, data, compressors)
    b[:32, :32] = 99.0  # raw: the same index, only the bytes differ
    key = a.chunk_key((0, 0))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        _copy_shard_over(other, path, key)
        data[:32, :32] = 99.0
        np.testing.assert_array_equal(a[3:9, 3:9], data[3:9, 3:9])
        np.testing.assert_array_equal(a[:], data)
        os.unlink(os.path.join(path, key))  # deleted behind our back: fill
        data[:32, :32] = 0.0
        np.testing.assert_array_equal(a[:], data)
        shutil.copyfile(os.path.join(other, key), os.path.join(path, key))  # back again
        data[:32, :32] = 99.0
        np.testing.assert_array_equal(a[:], data)


@pytest.mark.parametrize("root", ["memory", "fsspec"])
def test_deleted_or_recreated_array_never_serves_old_chunks(root):
    root = (cs.MemoryStore() if root == "memory"
            else f"memory://shcache-{uuid.uuid4().hex[:12]}")
    g = cs.group(root)
    data = _data()
    a = g.create_array("x", shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="f8")
    a[...] = data
    shared = ChunkCache("4MiB")
    r = cs.open_array(g.store, path="x", cache=shared)
    np.testing.assert_array_equal(r[:], data)
    assert len(shared) == 64
    del g["x"]
    assert len(shared) == 0
    same = g.create_array("x", shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="f8")
    np.testing.assert_array_equal(cs.open_array(g.store, path="x", cache=shared)[:],
                                  np.zeros(SHAPE))
    same[...] = data
    np.testing.assert_array_equal(cs.open_array(g.store, path="x", cache=shared)[:], data)
    # recreated with another dtype (same shapes): a new decoding, never the old one
    ints = g.create_array("x", shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="i4",
                          overwrite=True)
    ints[:16, :16] = 3
    expected = np.zeros(SHAPE, "i4")
    expected[:16, :16] = 3
    again = cs.open_array(g.store, path="x", cache=shared)
    assert again.dtype == np.dtype("i4")
    np.testing.assert_array_equal(again[:], expected)
    # another shard shape with the same inner chunks: another fingerprint
    other = g.create_array("x", shape=SHAPE, chunks=CHUNKS, shards=(16, 64), dtype="i4",
                           overwrite=True)
    assert other._engine.io_of()._sid.fingerprint != again._engine.io_of()._sid.fingerprint
    other[...] = expected + 1
    np.testing.assert_array_equal(cs.open_array(g.store, path="x", cache=shared)[:],
                                  expected + 1)


def test_budget_is_respected_and_groups_stay_bounded():
    data = _data()
    a = _array(CountingMemory(), data)
    budget = 5 * (8 * 8 * 8 + 600)
    with cs.config.set({"cache.chunk_bytes": budget}):
        cache = chunk_cache.shared()
        for i in range(40):  # many different regions: entries come and go
            sel = (slice(i % 50, i % 50 + 14), slice(2 * i % 40, 2 * i % 40 + 20))
            np.testing.assert_array_equal(a[sel], data[sel])
            assert cache.nbytes <= budget and len(cache) <= 5
        np.testing.assert_array_equal(a[:], data)
        assert cache.nbytes <= budget
        assert cache._grouped <= 2 * len(cache) + 1024
    with cs.config.set({"cache.chunk_bytes": 100}):  # smaller than one inner chunk
        np.testing.assert_array_equal(a[:], data)
        assert len(chunk_cache.shared()) == 0


def test_inner_entries_count_their_share_of_a_memory_shard():
    data = _data()
    a = _array(cs.MemoryStore(), data, compressors=None)
    shard_bytes = len(a.store.get(a.chunk_key((0, 0))))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:32, :32], data[:32, :32])
        cache = chunk_cache.shared()
        assert len(cache) == INNER
        assert INNER * 8 * 8 * 8 + shard_bytes <= cache.nbytes
        assert cache.nbytes <= INNER * (8 * 8 * 8 + 200) + shard_bytes + INNER


@pytest.mark.parametrize("off", [0, False, "0"])
def test_cache_zero_means_no_caching(off):
    data = _data()
    store = CountingMemory()
    a = _array(store, data, cache=off)
    reader = cs.open_array(store, mode="r", cache="1MiB")
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        n = store.reads
        np.testing.assert_array_equal(a[:], data)
        assert store.reads > n  # read again
        assert len(chunk_cache.shared()) == 0 and len(chunk_cache.off()) == 0
        np.testing.assert_array_equal(reader[:], data)
        a[20:40, 20:40] = 1.5  # an uncached writer still invalidates the others
        data[20:40, 20:40] = 1.5
        np.testing.assert_array_equal(reader[:], data)


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "plain"])
def test_shrinking_the_budget_below_one_chunk_trims_everything(sharded):
    data = _data()
    a = (_array(cs.MemoryStore(), data) if sharded else
         cs.array(data, store=cs.MemoryStore(), chunks=CHUNKS))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        assert len(chunk_cache.shared()) == 64
        with cs.config.set({"cache.chunk_bytes": 100}):
            np.testing.assert_array_equal(a[:], data)
            cache = chunk_cache.shared()
            assert len(cache) == 0 and cache.nbytes == 0
        with cs.config.set({"cache.chunk_bytes": 3000}):
            np.testing.assert_array_equal(a[:], data)
            assert 0 < chunk_cache.shared().nbytes <= 3000


def test_the_benchmark_row_of_a_sharded_array(tmp_path, monkeypatch):
    pytest.importorskip("psutil")
    from benchmarks import bench_cache
    monkeypatch.chdir(tmp_path)
    methods = "chunkstore,chunkstore+cache"
    try:
        import tensorstore  # noqa: F401
        methods += ",tensorstore+cache"
    except ImportError:
        pass
    rows = bench_cache.main(["--tiny", "--sources", "local-sharded", "--methods", methods])
    cases = {(r["case"], r["method"]) for r in rows}
    for m in ("chunkstore", "chunkstore +cache"):
        assert ("local-sharded region, repeated read", m) in cases
