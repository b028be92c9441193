"""Sharded arrays in the decoded-chunk cache under races: foreign writers landing
between the lookup and the read, another process rewriting shards, threads reading and
writing partial shards, stale hits, and values a user's dict changes in place.

Every step compares the exact content with NumPy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from tests.cache_settle import settle
from tests.io.cache.test_chunk_cache_sharded import (
    CHUNKS,
    KINDS,
    SHAPE,
    SHARDS,
    CountingMemory,
    _array,
    _data,
    _entries,
    _store,
)
from tests.multiproc import context

CTX = context()


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


def _rewrite_in_process(where, value):
    a = cs.open_array(where, mode="r+", cache=0)
    a[1:40, 2:35] = value


def test_foreign_process_rewrites_shards_behind_a_cached_reader(tmp_path):
    where = str(tmp_path / "a.zarr")
    data = _data()
    a = _array(where, data, cache="2MiB")
    settle(a.store, a._engine.io_of().cache)  # files changed within their window are not kept
    np.testing.assert_array_equal(a[:], data)
    assert len(a._engine.io_of().cache) == 64
    p = CTX.Process(target=_rewrite_in_process, args=(where, -7.0))
    p.start()
    p.join(180)
    assert p.exitcode == 0
    data[1:40, 2:35] = -7.0
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(a[30:34, 30:34], data[30:34, 30:34])


def test_a_stale_hit_drops_its_whole_shard():
    data = _data()
    store = CountingMemory()
    a = _array(store, data)
    other = _array(cs.MemoryStore(), -data)
    key = a.chunk_key((0, 0))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        store.set(key, other.store.get(key))
        np.testing.assert_array_equal(a[0, 0], -data[0, 0])  # one stale hit
        assert _entries(chunk_cache.shared(), key) == [0]  # the old version all gone
        data[:32, :32] *= -1
        np.testing.assert_array_equal(a[:], data)


def test_mutable_shard_values_are_never_kept():
    data = _data()
    store = cs.MemoryStore()
    a = _array(store, data, compressors=None)
    key = a.chunk_key((0, 0))
    store._data[key] = bytearray(store._data[key])  # a user's dict holding a bytearray
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:], data)
        assert _entries(chunk_cache.shared(), key) == []
        assert len(chunk_cache.shared()) == 48
        raw = store._data[key]
        raw[:8] = np.float64(12345.0).tobytes()  # changed in place
        data[0, 0] = 12345.0
        np.testing.assert_array_equal(a[:], data)


@pytest.mark.parametrize("kind", KINDS)
def test_threads_reading_and_writing_partial_shards(tmp_path, kind):
    store = _store(kind, tmp_path)
    a = cs.create_array(store, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="i4",
                        fill_value=0, cache="1MiB")
    bands = [(0, 13), (13, 30), (30, 47), (47, 64)]  # unaligned: shared shards
    rounds = 12
    errors: list[str] = []
    done = threading.Event()

    def writer(lo, hi):
        try:
            for r in range(1, rounds + 1):
                a[lo:hi, :] = r
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    def reader(obj):
        seen = np.zeros(SHAPE, "i4")
        while not done.is_set():
            got = obj[...]
            if (got < seen).any():
                errors.append("a value went back")
            seen = np.maximum(seen, got)

    readers = [threading.Thread(target=reader, args=(a,)),
               threading.Thread(target=reader, args=(cs.open_array(store, cache=None),))]
    writers = [threading.Thread(target=writer, args=b) for b in bands]
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join(120)
        done.set()
        for t in readers:
            t.join(120)
        assert not errors, errors[:5]
        expected = np.full(SHAPE, rounds, "i4")
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(cs.open_array(store, cache=None)[...], expected)
    np.testing.assert_array_equal(cs.open_array(store, cache=0)[...], expected)


class SwappingMemory(cs.MemoryStore):
    """A foreign writer landing between the cache lookup and the read: the first read
    call after ``arm`` replaces the shard ``key`` by ``value`` first."""

    armed = None

    def _swap(self):
        if self.armed is not None:
            key, value = self.armed
            self.armed = None
            self._data[key] = value

    def get_ranges(self, requests, *args, **kwargs):
        self._swap()
        return super().get_ranges(requests, *args, **kwargs)

    def get_versioned_ranges(self, requests):
        self._swap()
        return super().get_versioned_ranges(requests)


def test_one_read_never_mixes_two_versions_of_a_shard():
    data = _data()
    store = SwappingMemory()
    a = _array(store, data)
    new = _array(cs.MemoryStore(), -data)
    key = a.chunk_key((0, 0))
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        np.testing.assert_array_equal(a[:8, :8], data[:8, :8])  # inner chunk 0 kept
        store.armed = (key, new.store.get(key))  # replaced after the lookup served it
        np.testing.assert_array_equal(a[:16, :16], -data[:16, :16])
        data[:32, :32] *= -1
        np.testing.assert_array_equal(a[:], data)
