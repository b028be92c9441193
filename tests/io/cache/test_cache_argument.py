"""The per-array ``cache=`` argument (issue 12): an LRU of decoded chunks with a byte
budget, set per array (or by ``chunkstore.config``), off by default, invalidated by
writes, and shareable between arrays as one ``ChunkCache``."""

import pickle
from dataclasses import replace

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache

CHUNK = (16, 16)  # float64: 2 KiB a chunk
ENTRY = 16 * 16 * 8 + chunk_cache._ENTRY_OVERHEAD  # what one cached chunk counts


class CountingStore(cs.MemoryStore):
    """Counts every key read (whole, by range or as views), also through its read-only
    views (``mode="r"`` opens one)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._count = [0]  # shared with the views

    @property
    def reads(self):
        return self._count[0]

    def get(self, key, byte_range=None):
        self._count[0] += 1
        return super().get(key, byte_range)

    def get_ranges(self, requests):
        self._count[0] += len(requests)
        return super().get_ranges(requests)

    def get_many(self, keys):
        self._count[0] += len(keys)
        return super().get_many(keys)

    def get_views(self, keys):
        self._count[0] += len(keys)
        return super().get_views(keys)


class UnvalidatedStore(CountingStore):
    """A store whose cached chunks are not revalidated (as S3 or zip): only the
    invalidation by writes keeps the cache right."""

    capabilities = replace(cs.MemoryStore.capabilities, cache_tokens=False)


@pytest.fixture(autouse=True)
def _fresh_caches():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


def _stored(store_cls=CountingStore, shape=(64, 64)):
    data = np.arange(np.prod(shape), dtype="f8").reshape(shape)
    store = store_cls()
    cs.create_array(store, shape=shape, chunks=CHUNK, dtype="f8")[...] = data
    return store, data


OPENERS = {
    "open_array": lambda st, cache: cs.open_array(st, mode="r+", cache=cache),
    "open": lambda st, cache: cs.open(st, mode="r+", cache=cache),
    "Array.open": lambda st, cache: cs.Array.open(st, cache=cache),
}


@pytest.mark.parametrize("opener", sorted(OPENERS))
@pytest.mark.parametrize("cache", [2**20, "1MiB", "1 MB", ChunkCache(2**20)],
                         ids=["int", "MiB", "MB", "ChunkCache"])
def test_a_repeated_read_makes_no_store_reads(opener, cache):
    store, data = _stored()
    a = OPENERS[opener](store, cache)
    np.testing.assert_array_equal(a[3:40, 5:20], data[3:40, 5:20])
    before = store.reads
    for _ in range(3):
        np.testing.assert_array_equal(a[3:40, 5:20], data[3:40, 5:20])
        np.testing.assert_array_equal(a[7, 17], data[7, 17])
    assert store.reads == before
    assert len(chunk_cache.shared()) == 0  # a per-array cache, not the process-wide one


@pytest.mark.parametrize("create", ["create_array", "create", "zeros"])
def test_created_arrays_take_the_argument_too(create):
    store = CountingStore()
    make = getattr(cs, create)
    if create == "create_array":
        a = make(store, shape=(64, 64), chunks=CHUNK, dtype="f8", cache="1MiB")
    else:
        a = make((64, 64), store=store, chunks=CHUNK, dtype="f8", cache="1MiB")
    a[...] = 3.0
    assert (a[:20, :20] == 3.0).all()
    before = store.reads
    assert (a[:20, :20] == 3.0).all()
    assert store.reads == before


@pytest.mark.parametrize("store_cls", [CountingStore, UnvalidatedStore])
def test_a_write_invalidates(store_cls):
    store, data = _stored(store_cls)
    a = cs.open_array(store, mode="r+", cache="1MiB")
    ref = data.copy()
    np.testing.assert_array_equal(a[:], ref)  # every chunk cached
    a[10:20, 10:50] = -1.0  # through the same array
    ref[10:20, 10:50] = -1.0
    np.testing.assert_array_equal(a[:], ref)
    a.set_orthogonal_selection(([1, 33], slice(None)), 7.0)
    ref[[1, 33], :] = 7.0
    np.testing.assert_array_equal(a[:], ref)
    # through other array objects on the same store: with their own cache, or none
    for cache in (0, "1MiB", None):
        other = cs.open_array(store, mode="r+", cache=cache)
        other[40:64, :8] += 1.0
        ref[40:64, :8] += 1.0
        np.testing.assert_array_equal(a[:], ref)
    a.resize(32, 64)  # deleted chunks are not served from the cache either
    a.resize(64, 64)
    ref[32:] = 0.0
    np.testing.assert_array_equal(a[:], ref)


def test_arrays_sharing_a_cache_obey_one_budget():
    budget = 6 * ENTRY  # room for 4 to 6 chunks (an entry counts its validation token too)
    shared = ChunkCache(budget)
    store_a, data_a = _stored()
    store_b, data_b = _stored()
    a = cs.open_array(store_a, mode="r", cache=shared)
    b = cs.open_array(store_b, mode="r", cache=shared)
    np.testing.assert_array_equal(a[:32, :32], data_a[:32, :32])  # 4 chunks
    assert len(shared) == 4 and shared.nbytes <= budget
    np.testing.assert_array_equal(b[:32, :32], data_b[:32, :32])  # 4 more: evictions
    assert 4 <= len(shared) < 8 and shared.nbytes <= budget
    before = store_a.reads
    np.testing.assert_array_equal(a[:32, :32], data_a[:32, :32])
    assert store_a.reads > before  # a's chunks were evicted for b's
    # an int budget is a private cache of that size: separate from the shared one
    c = cs.open_array(store_b, mode="r", cache=budget)
    np.testing.assert_array_equal(c[:16, :16], data_b[:16, :16])
    assert c._engine.io_of().cache is not shared and len(c._engine.io_of().cache) == 1


def test_off_by_default():
    assert cs.config.get("cache.chunk_bytes") == 0
    store, data = _stored()
    for a in (cs.open_array(store, mode="r"), cs.open_array(store, mode="r", cache=0),
              cs.open_array(store, mode="r", cache=False), cs.Array.open(store)):
        np.testing.assert_array_equal(a[:20, :20], data[:20, :20])
        before = store.reads
        np.testing.assert_array_equal(a[:20, :20], data[:20, :20])
        assert store.reads > before
    # cache=None follows the config; cache=0 is off whatever it says
    with cs.config.set({"cache.chunk_bytes": 2**20}):
        on, off = cs.open_array(store, mode="r"), cs.open_array(store, mode="r", cache=0)
        on[:20, :20]
        before = store.reads
        on[:20, :20]
        assert store.reads == before
        off[:20, :20]
        assert store.reads > before


@pytest.mark.parametrize("bad", [-1, -0.5, 1.5, "lots", "-3MB", "12 parsecs", True,
                                 float("nan"), [1024], object()])
def test_bad_values_name_the_argument(bad):
    store, _ = _stored()
    calls = [lambda: cs.open_array(store, mode="r", cache=bad),
             lambda: cs.open(store, mode="r", cache=bad),
             lambda: cs.Array.open(store, cache=bad),
             lambda: cs.Array(store, "", cache=bad)]
    for call in calls:
        with pytest.raises(ValueError, match="cache"):
            call()
    fresh = CountingStore()
    with pytest.raises(ValueError, match="cache"):
        cs.create_array(fresh, shape=(4,), dtype="i4", cache=bad)
    assert not list(fresh.list())  # refused before anything was created
    with pytest.raises(ValueError, match="nbytes"):
        ChunkCache(-1)


def test_pickled_arrays_keep_the_budget():
    store, data = _stored()
    a = cs.open_array(store, mode="r", cache="1MiB")
    b = pickle.loads(pickle.dumps(a))
    assert b._engine.io_of().cache.budget == 2**20 and b._engine.io_of().cache is not a._engine.io_of().cache
    np.testing.assert_array_equal(b[:], data)
    off = pickle.loads(pickle.dumps(cs.open_array(store, mode="r", cache=0)))
    assert off._engine.io_of().cache is chunk_cache.off()
