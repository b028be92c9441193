"""The decoded-chunk cache (``chunkstore.io.cache.chunk_cache``): off by default, hits, budget,
invalidation by this process's writes and validation against foreign writers."""

import os

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.engine import layout_of, open_engine


class CountingStore(cs.MemoryStore):
    """Counts the keys fetched whole (what a cache hit avoids)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fetched = 0

    def get_many(self, keys):
        self.fetched += len(keys)
        return super().get_many(keys)


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


def _array(store=None, compressors="auto"):
    data = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    a = cs.array(data, store=store if store is not None else CountingStore(), chunks=(16, 16),
                 compressors=compressors)
    return a, data


def test_off_by_default():
    assert cs.config.get("cache.chunk_bytes") == 0
    a, data = _array()
    np.testing.assert_array_equal(a[:], data)
    assert len(chunk_cache.shared()) == 0


def test_hits_skip_the_store_and_give_the_same_values():
    a, data = _array()
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[3:40, 5:20], data[3:40, 5:20])
        first = a.store.fetched
        assert len(chunk_cache.shared()) == 3 * 2
        for _ in range(3):
            np.testing.assert_array_equal(a[3:40, 5:20], data[3:40, 5:20])
            np.testing.assert_array_equal(a[7, 17], data[7, 17])
        assert a.store.fetched == first  # all hits
        # another array object on the same store shares the entries
        b = cs.open_array(a.store, mode="r")
        np.testing.assert_array_equal(b[3:40, 5:20], data[3:40, 5:20])
        assert a.store.fetched == first


def test_missing_chunks_are_cached_as_fill():
    store = CountingStore()
    a = cs.create_array(store, shape=(32, 32), chunks=(16, 16), dtype="i4", fill_value=7)
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        assert (a[:] == 7).all()
        n = store.fetched
        assert (a[:] == 7).all() and store.fetched == n
        a[0, 0] = 1  # the write invalidates the chunk it touched
        assert a[0, 0] == 1 and a[1, 1] == 7


def test_budget_is_respected_and_lru():
    a, data = _array()
    chunk = 16 * 16 * 8
    with cs.config.set({"cache.chunk_bytes": 3 * chunk + 1000}):
        np.testing.assert_array_equal(a[:], data)  # 16 chunks read, 3 kept
        cache = chunk_cache.shared()
        assert len(cache) <= 3 and cache.nbytes <= 3 * chunk + 1000
    with cs.config.set({"cache.chunk_bytes": 0}):
        np.testing.assert_array_equal(a[:1], data[:1])
        assert len(chunk_cache.shared()) == 0  # turning it off empties it


def test_a_chunk_larger_than_the_budget_is_not_kept():
    a, data = _array()
    with cs.config.set({"cache.chunk_bytes": 100}):
        np.testing.assert_array_equal(a[:], data)
        assert len(chunk_cache.shared()) == 0


def test_writes_invalidate_entries_of_every_array_object(tmp_path):
    for store in (CountingStore(), str(tmp_path / "a.zarr")):
        a, data = _array(store)
        b = cs.open_array(a.store, mode="r+")
        with cs.config.set({"cache.chunk_bytes": 2**20}):
            np.testing.assert_array_equal(a[:], data)
            b[10:20, 10:20] = -1.0
            data[10:20, 10:20] = -1.0
            np.testing.assert_array_equal(a[:], data)
            b[:16, :16] = 0  # all fill: the chunk is deleted
            data[:16, :16] = 0
            np.testing.assert_array_equal(a[:], data)
            b.resize(8, 8)
            b.resize(64, 64)
            np.testing.assert_array_equal(a[:], np.pad(data[:8, :8], ((0, 56), (0, 56))))


def test_cached_values_are_read_only_inside_the_cache():
    a, data = _array()
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        out = a[:16, :16]
        out[...] = 5  # the caller's copy, not the entry
        np.testing.assert_array_equal(a[:16, :16], data[:16, :16])


@pytest.mark.parametrize("compressors", [None, "auto"], ids=["raw", "blosc"])
def test_local_files_replaced_by_a_foreign_writer_are_seen(tmp_path, compressors):
    path = str(tmp_path / "a.zarr")
    a, data = _array(path, compressors)
    other = str(tmp_path / "b.zarr")
    b, _ = _array(other, compressors)
    b[:16, :16] = 99.0
    key = a.chunk_key((0, 0))
    payload = open(os.path.join(other, key), "rb").read()
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        tmp = os.path.join(path, key + ".foreign")
        with open(tmp, "wb") as f:  # another process: rename over the key
            f.write(payload)
        os.replace(tmp, os.path.join(path, key))
        assert (a[:16, :16] == 99.0).all()
        os.unlink(os.path.join(path, key))  # deleted behind our back: fill
        assert (a[:16, :16] == 0).all()


def test_memory_store_values_set_behind_the_array_are_seen():
    a, data = _array(compressors=None)
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        key = a.chunk_key((0, 0))
        a.store.set(key, np.full((16, 16), 3.0).tobytes())  # not through the engine
        assert (a[:16, :16] == 3.0).all()


def test_a_private_cache_per_engine():
    a, data = _array()
    meta = a.metadata
    engine = open_engine(a.store, layout_of(meta, ""), a._engine.pipeline, meta, "x",
                         cache=chunk_cache.ChunkCache(2**20))
    out = np.empty((64, 64))
    engine.read(a._indexer(slice(None), "basic"), out)
    np.testing.assert_array_equal(out, data)
    assert len(engine.io_of().cache) == 16 and len(chunk_cache.shared()) == 0
    n = a.store.fetched
    engine.read(a._indexer(slice(None), "basic"), out)
    assert a.store.fetched == n
    off = open_engine(a.store, layout_of(meta, ""), a._engine.pipeline, meta, "x", cache=False)
    assert off.io_of().cache is None


@pytest.mark.parametrize("shards", [None, (8, 8)])
def test_the_cache_place_is_worked_out_only_when_needed(monkeypatch, shards):
    """An array's place in the cache (its codec fingerprint) is not computed by reads
    while the cache is off (it was part of every first read), is computed once for a
    write (which invalidates) and serves cached reads exactly once the cache is on."""
    calls = []
    real = chunk_cache.fingerprint

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(chunk_cache, "fingerprint", counting)  # what both unit IOs call
    store = cs.MemoryStore()
    x = np.arange(16 * 16, dtype="i4").reshape(16, 16)
    cs.create_array(store, shape=x.shape, chunks=(4, 4), shards=shards, dtype="i4")[...] = x
    calls.clear()
    a = cs.open_array(store, mode="r")
    np.testing.assert_array_equal(a[...], x)
    assert calls == []  # the cache is off: nothing to place
    b = cs.open_array(store)
    b[0, 0] = 7
    b[1, 1] = 8
    assert len(calls) == 1  # a write invalidates: placed once per engine
    x[0, 0], x[1, 1] = 7, 8
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        c = cs.open_array(store, mode="r")
        np.testing.assert_array_equal(c[...], x)
        np.testing.assert_array_equal(c[...], x)  # from the cache
    assert len(calls) == 2
