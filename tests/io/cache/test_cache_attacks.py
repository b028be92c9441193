"""Red team, round 3: the decoded-chunk cache (``cache=``, ``ChunkCache``,
``cache.chunk_bytes``) attacked as a hostile user would.

Every test compares the exact final content with NumPy (or asserts an error naming the
argument). Foreign writers are real spawned processes where the test says "process".
"""

from __future__ import annotations

import json
import math
import os
import pickle
import threading
import uuid
import zipfile
from collections.abc import MutableMapping

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache
from tests.multiproc import context

CTX = context()


def _in_process(target, *args, timeout=180):
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(timeout)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0, f"child exit code {p.exitcode}"


def _uid() -> str:
    return uuid.uuid4().hex[:12]


# -- foreign processes rewriting chunks behind a cached array -------------------------------
def _rewrite_local(where, value):
    a = cs.open_array(where, mode="r+", cache=0)
    a[...] = np.full(a.shape, value, dtype=a.dtype)


def _rewrite_local_zarr(where, value):
    import zarr

    z = zarr.open_array(where, mode="r+")
    z[...] = np.full(z.shape, value, dtype=z.dtype)


def _rewrite_one_element(where, index, value):
    a = cs.open_array(where, mode="r+", cache=0)
    a[index] = value


@pytest.mark.parametrize("compressors", [None, "auto"])
def test_process_rewrites_local_chunks_behind_cached_array(tmp_path, compressors):
    where = str(tmp_path / "a.zarr")
    a = cs.create_array(where, shape=(30, 7), chunks=(8, 4), dtype="i4",
                        compressors=compressors, cache="64MiB")
    a[...] = 1
    np.testing.assert_array_equal(a[...], np.ones((30, 7), "i4"))
    for value in (2, 3, 4):
        _in_process(_rewrite_local, where, value)
        np.testing.assert_array_equal(a[...], np.full((30, 7), value, "i4"))
        np.testing.assert_array_equal(a[5:9, 2:6], np.full((4, 4), value, "i4"))
    # zarr-python as the foreign writer (atomic rename, same chunk sizes)
    _in_process(_rewrite_local_zarr, where, 9)
    np.testing.assert_array_equal(a[...], np.full((30, 7), 9, "i4"))


def test_process_changes_one_element_same_size_chunk(tmp_path):
    # uncompressed: the rewritten chunk has exactly the size of the cached one
    where = str(tmp_path / "a.zarr")
    a = cs.create_array(where, shape=(16,), chunks=(8,), dtype="i8", compressors=None,
                        cache="1MiB")
    a[...] = np.arange(16)
    expected = np.arange(16)
    assert a[3] == 3
    for i, index in enumerate((3, 4, 12, 3)):
        _in_process(_rewrite_one_element, where, index, -100 - i)
        expected[index] = -100 - i
        np.testing.assert_array_equal(a[...], expected)


def _inplace_same_size(path, payload):
    # rewrite an uncompressed chunk file in place: same inode, same size
    with open(path, "r+b") as f:
        f.write(payload)


def test_process_rewrites_chunk_file_in_place(tmp_path):
    where = tmp_path / "a.zarr"
    a = cs.create_array(str(where), shape=(8,), chunks=(8,), dtype="<i4", compressors=None,
                        cache="1MiB")
    a[...] = np.arange(8)
    np.testing.assert_array_equal(a[...], np.arange(8))
    chunk = where / "c" / "0"
    assert chunk.stat().st_size == 32
    new = np.arange(8, dtype="<i4")[::-1].copy()
    _in_process(_inplace_same_size, str(chunk), new.tobytes())
    np.testing.assert_array_equal(a[...], new)


class SharedDict(MutableMapping):
    """A dict-like store whose data lives in a multiprocessing manager (so another process
    can change it): the "MemoryStore-like dict" of a hostile user."""

    def __init__(self, proxy):
        self.proxy = proxy

    def __getitem__(self, key):
        return self.proxy[key]

    def __setitem__(self, key, value):
        self.proxy[key] = bytes(value)

    def __delitem__(self, key):
        del self.proxy[key]

    def __iter__(self):
        return iter(list(self.proxy.keys()))

    def __len__(self):
        return len(self.proxy)

    def get(self, key, default=None):
        return self.proxy.get(key, default)


def _rewrite_shared_dict(proxy, value, start, stop):
    a = cs.open_array(SharedDict(proxy), mode="r+", cache=0)
    a[start:stop] = value


def test_process_rewrites_chunks_in_shared_dict_behind_cached_array():
    with CTX.Manager() as manager:
        proxy = manager.dict()
        a = cs.create_array(SharedDict(proxy), shape=(20,), chunks=(6,), dtype="f8",
                            fill_value=-1.0, cache="1MiB")
        a[:10] = 5.0
        expected = np.full(20, -1.0)
        expected[:10] = 5.0
        np.testing.assert_array_equal(a[...], expected)
        for value, start, stop in ((7.0, 2, 9), (8.0, 0, 20), (9.5, 17, 18)):
            _in_process(_rewrite_shared_dict, proxy, value, start, stop)
            expected[start:stop] = value
            np.testing.assert_array_equal(a[...], expected)
        # the foreign process deletes a chunk key: reads fill again
        _in_process(_delete_shared_key, proxy, "c/1")
        expected[6:12] = -1.0
        np.testing.assert_array_equal(a[...], expected)


def _delete_shared_key(proxy, key):
    del proxy[key]


def test_user_mutates_dict_store_directly():
    d = {}
    a = cs.create_array(d, shape=(8,), chunks=(4,), dtype="<i4", compressors=None,
                        cache="1MiB")
    a[...] = np.arange(8)
    assert a[1] == 1
    d["c/0"] = np.array([9, 9, 9, 9], "<i4").tobytes()
    np.testing.assert_array_equal(a[...], [9, 9, 9, 9, 4, 5, 6, 7])
    del d["c/1"]
    np.testing.assert_array_equal(a[...], [9, 9, 9, 9, 0, 0, 0, 0])


def _rewrite_zip(where, value):
    a = cs.create_array(where, shape=(10,), chunks=(3,), dtype="i2", overwrite=True,
                        cache=0)
    a[...] = value
    a.store.close()


def test_process_rewrites_zip_then_clear_and_uncached_see_it(tmp_path):
    where = str(tmp_path / "a.zip")
    a = cs.create_array(where, shape=(10,), chunks=(3,), dtype="i2", cache=0)
    a[...] = 1
    a.store.close()
    shared = ChunkCache("1MiB")
    r = cs.open_array(where, mode="r", cache=shared)
    np.testing.assert_array_equal(r[...], np.ones(10, "i2"))
    r.store.close()
    _in_process(_rewrite_zip, where, 2)
    with zipfile.ZipFile(where) as z:
        assert "zarr.json" in z.namelist()
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...],
                                  np.full(10, 2, "i2"))
    chunk_cache.clear()  # the documented remedy for non-revalidated stores
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=shared)[...],
                                  np.full(10, 2, "i2"))


def test_zip_fresh_uncached_open_sees_other_process_archive_while_old_reader_lives(tmp_path):
    # a ZipStore of the path still alive in this process must not make a *fresh*
    # open_array(..., cache=0) read the archive another process has since replaced
    where = str(tmp_path / "a.zip")
    a = cs.create_array(where, shape=(10,), chunks=(3,), dtype="i2", cache=0)
    a[...] = 1
    a.store.close()
    r = cs.open_array(where, mode="r", cache=0)
    np.testing.assert_array_equal(r[...], np.ones(10, "i2"))
    _in_process(_rewrite_zip, where, 2)
    with zipfile.ZipFile(where) as z:
        assert np.frombuffer(z.read("zarr.json")[:1], "u1").size == 1
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...],
                                  np.full(10, 2, "i2"))


# -- resize / append through another handle ---------------------------------------------------
def _stores():
    return {
        "local": lambda tmp: str(tmp / f"{_uid()}.zarr"),
        "dict": lambda tmp: {},
        "memory-url": lambda tmp: f"memory://rt3-{_uid()}/a.zarr",
    }


@pytest.mark.parametrize("kind", sorted(_stores()))
def test_shrink_then_grow_through_other_handle(tmp_path, kind):
    where = _stores()[kind](tmp_path)
    a = cs.create_array(where, shape=(10,), chunks=(4,), dtype="i4", fill_value=-7,
                        cache="1MiB")
    a[...] = np.arange(10)
    np.testing.assert_array_equal(a[...], np.arange(10))
    b = cs.open_array(where, mode="r+", cache=0)
    b.resize((3,))
    b.resize((10,))
    expected = np.array([0, 1, 2] + [-7] * 7, "i4")
    np.testing.assert_array_equal(b[...], expected)
    again = cs.open_array(where, mode="r", cache=a_cache(a))
    np.testing.assert_array_equal(again[...], expected)
    np.testing.assert_array_equal(a[...], expected)


def a_cache(a):
    """The ChunkCache an array reads through."""
    cache = a._engine.io_of().cache
    assert isinstance(cache, ChunkCache)
    return cache


def _shrink_grow(where):
    b = cs.open_array(where, mode="r+", cache=0)
    b.resize((3, 5))
    b.resize((9, 5))


def test_process_shrinks_then_grows_local(tmp_path):
    where = str(tmp_path / "a.zarr")
    a = cs.create_array(where, shape=(9, 5), chunks=(2, 2), dtype="i4", fill_value=0,
                        cache="1MiB")
    a[...] = np.arange(45).reshape(9, 5) + 1
    assert a[...].sum() == sum(range(1, 46))
    _in_process(_shrink_grow, where)
    expected = np.zeros((9, 5), "i4")
    expected[:3] = (np.arange(45).reshape(9, 5) + 1)[:3]
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...], expected)
    np.testing.assert_array_equal(a[...], expected)


@pytest.mark.parametrize("kind", sorted(_stores()))
def test_append_through_other_handle_edge_chunk(tmp_path, kind):
    where = _stores()[kind](tmp_path)
    shared = ChunkCache("1MiB")
    a = cs.create_array(where, shape=(8,), chunks=(5,), dtype="i4", fill_value=0,
                        cache=shared)
    a[...] = np.arange(8) + 1
    np.testing.assert_array_equal(a[...], np.arange(8) + 1)  # edge chunk c/1 cached
    b = cs.open_array(where, mode="r+", cache=0)
    b.append(np.array([100, 101, 102, 103], "i4"))
    c = cs.open_array(where, mode="r", cache=shared)
    expected = np.concatenate([np.arange(8) + 1, [100, 101, 102, 103]]).astype("i4")
    np.testing.assert_array_equal(c[...], expected)
    np.testing.assert_array_equal(c[5:10], expected[5:10])


@pytest.mark.parametrize("kind", sorted(_stores()))
def test_write_through_other_array_object_same_path(tmp_path, kind):
    where = _stores()[kind](tmp_path)
    a = cs.create_array(where, shape=(6, 6), chunks=(4, 4), dtype="f4", cache="1MiB")
    a[...] = 1.0
    assert float(a[...].sum()) == 36.0
    for cache in (0, None, "1MiB", ChunkCache("2MiB")):
        b = cs.open_array(where, mode="r+", cache=cache)
        value = np.random.default_rng(0).random((6, 6)).astype("f4")
        b[1:5, 2:6] = value[1:5, 2:6]
        expected = np.ones((6, 6), "f4")
        expected[1:5, 2:6] = value[1:5, 2:6]
        np.testing.assert_array_equal(a[...], expected)
        b[...] = 1.0


def test_write_through_other_root_of_same_fsspec_data():
    root = f"memory://rt3-{_uid()}"
    g = cs.group(root)
    g.create_array("x", shape=(8,), chunks=(4,), dtype="i4")[...] = 1
    p = cs.open_array(root, path="x", cache="1MiB")
    np.testing.assert_array_equal(p[...], np.ones(8, "i4"))
    q = cs.open_array(root + "/x", mode="r+", cache=0)
    q[...] = 2
    np.testing.assert_array_equal(p[...], np.full(8, 2, "i4"))


def test_overwrite_with_other_dtype_reads_fill_not_old_cached_chunks():
    where = f"memory://rt3-{_uid()}/x"
    shared = ChunkCache("1MiB")
    x = cs.create_array(where, shape=(8,), chunks=(4,), dtype="i4", cache=shared)
    x[...] = np.arange(8)
    np.testing.assert_array_equal(x[...], np.arange(8))
    y = cs.create_array(where, shape=(8,), chunks=(4,), dtype="f8", fill_value=-1.5,
                        overwrite=True, cache=shared)
    np.testing.assert_array_equal(y[...], np.full(8, -1.5))


def test_cached_chunk_not_reused_across_different_metadata():
    d = {}
    shared = ChunkCache("1MiB")
    a = cs.create_array(d, shape=(8,), chunks=(4,), dtype="<i4", compressors=None,
                        cache=shared)
    a[...] = np.arange(8, dtype="<i4")
    np.testing.assert_array_equal(a[...], np.arange(8))
    meta = json.loads(d["zarr.json"])
    meta["data_type"] = "float32"
    meta["fill_value"] = 0.0
    d["zarr.json"] = json.dumps(meta).encode()
    expected = np.arange(8, dtype="<i4").view("<f4")
    np.testing.assert_array_equal(cs.open_array(d, cache=0)[...], expected)
    np.testing.assert_array_equal(cs.open_array(d, cache=shared)[...], expected)


# -- budgets and bad values ------------------------------------------------------------------
def test_budget_smaller_than_one_chunk():
    data = np.arange(40 * 40, dtype="f8").reshape(40, 40)
    for budget in (1, 100, 201, "1KiB"):
        cache = ChunkCache(budget)
        a = cs.create_array({}, shape=data.shape, chunks=(20, 20), dtype="f8", cache=cache)
        a[...] = data
        for _ in range(3):
            np.testing.assert_array_equal(a[...], data)
            np.testing.assert_array_equal(a[3:33, 7:29], data[3:33, 7:29])
        assert cache.nbytes <= cache.budget
        a[5, 5] = -1
        expected = data.copy()
        expected[5, 5] = -1
        np.testing.assert_array_equal(a[...], expected)


def test_shared_budget_holds_across_arrays():
    cache = ChunkCache(3 * (8 * 100 + 200))
    arrays = []
    for i in range(4):
        a = cs.create_array({}, shape=(500,), chunks=(100,), dtype="i8", cache=cache)
        a[...] = np.arange(500) * (i + 1)
        arrays.append(a)
    for _ in range(2):
        for i, a in enumerate(arrays):
            np.testing.assert_array_equal(a[...], np.arange(500) * (i + 1))
            assert cache.nbytes <= cache.budget
    assert len(cache) <= 3


BAD = [-1, "-1MiB", "lots", True, math.nan, math.inf, -math.inf, 1.5, b"64", [64],
       {"a": 1}, object(), "64 potatoes", complex(1, 0)]


def _id(value: object) -> str:
    """A stable test id (an object()'s repr has its address, which differs per process)."""
    return type(value).__name__ if type(value) is object else repr(value)


@pytest.mark.parametrize("bad", BAD, ids=_id)
def test_bad_cache_values_name_cache_and_create_nothing(tmp_path, bad):
    where = tmp_path / "a.zarr"
    with pytest.raises(ValueError, match="cache"):
        cs.create_array(str(where), shape=(4,), dtype="i4", cache=bad)
    assert not where.exists()
    with pytest.raises(ValueError, match="cache"):
        cs.open_array(str(where), mode="w", shape=(4,), dtype="i4", cache=bad)
    assert not where.exists()
    with pytest.raises(ValueError, match="cache"):
        cs.open(str(where), mode="w", shape=(4,), dtype="i4", cache=bad)
    assert not where.exists()
    with pytest.raises(ValueError, match="cache"):
        cs.create(shape=(4,), store=str(where), dtype="i4", cache=bad)
    assert not where.exists()


@pytest.mark.parametrize("bad", [-1, "lots", True, math.nan, 1.5], ids=repr)
def test_bad_chunkcache_budget_names_nbytes(bad):
    with pytest.raises(ValueError, match="nbytes"):
        ChunkCache(bad)


@pytest.mark.parametrize("off", [0, False, "0", "0B", 0.0, np.int64(0)], ids=repr)
def test_off_values_read_and_write_exact(off):
    a = cs.create_array({}, shape=(9,), chunks=(4,), dtype="i2", cache=off)
    a[...] = np.arange(9)
    a[2:7] = -3
    expected = np.arange(9).astype("i2")
    expected[2:7] = -3
    np.testing.assert_array_equal(a[...], expected)


@pytest.mark.parametrize("value", ["64MiB", "lots", math.nan])
def test_config_chunk_bytes_size_string_or_garbage(value):
    """A size string is taken; garbage is refused when set, naming the key."""
    a = cs.create_array({}, shape=(10,), chunks=(5,), dtype="i4")
    a[...] = np.arange(10)
    if value == "64MiB":
        with cs.config.set({"cache.chunk_bytes": value}):
            assert cs.config.get("cache.chunk_bytes") == 64 * 2**20
            np.testing.assert_array_equal(a[...], np.arange(10))
            np.testing.assert_array_equal(a[...], np.arange(10))
        return
    with pytest.raises(ValueError, match="cache.chunk_bytes"):
        cs.config.set({"cache.chunk_bytes": value})
    np.testing.assert_array_equal(a[...], np.arange(10))


def test_config_budget_change_while_cached_entries_live():
    a = cs.create_array({}, shape=(100,), chunks=(10,), dtype="i8")
    a[...] = np.arange(100)
    with cs.config.set({"cache.chunk_bytes": 1 << 20}):
        np.testing.assert_array_equal(a[...], np.arange(100))
        a[5] = -5
    expected = np.arange(100)
    expected[5] = -5
    np.testing.assert_array_equal(a[...], expected)  # cache off now
    with cs.config.set({"cache.chunk_bytes": 500}):  # shrunk below the entries held
        np.testing.assert_array_equal(a[...], expected)
        assert chunk_cache.shared().nbytes <= 500
        a[50:60] = 0
        expected[50:60] = 0
        np.testing.assert_array_equal(a[...], expected)


# -- results must be the caller's own memory -----------------------------------------------
def test_results_are_writable_copies_not_cache_entries():
    a = cs.create_array({}, shape=(8, 8), chunks=(4, 4), dtype="i4", cache="1MiB")
    a[...] = 3
    for read in (lambda: a[0:4, 0:4], lambda: a[...], lambda: a.blocks[0, 0],
                 lambda: a.get_block_selection((1, 1)), lambda: np.asarray(a),
                 lambda: a.oindex[[0, 1, 2, 3], :4], lambda: a[0], lambda: a[0:4]):
        r = read()
        r[...] = 99
        np.testing.assert_array_equal(a[...], np.full((8, 8), 3, "i4"))


def test_zero_d_and_object_and_structured_arrays_with_cache():
    z = cs.create_array({}, shape=(), dtype="f8", fill_value=1.5, cache="1MiB")
    assert z[()] == 1.5
    z[()] = 2.5
    assert z[()] == 2.5
    z2 = cs.open_array(z.store, cache=0)
    z2[()] = 3.5
    assert z[()] == 3.5
    s = cs.create_array({}, shape=(5,), chunks=(2,), dtype=str, cache="1MiB")
    s[...] = np.array(["a", "bb", "", "dddd", "é"])
    np.testing.assert_array_equal(s[...], np.array(["a", "bb", "", "dddd", "é"]))
    s[1] = "zz"
    np.testing.assert_array_equal(s[...], np.array(["a", "zz", "", "dddd", "é"]))
    rec = np.dtype([("x", "<i4"), ("y", ">f8")])
    r = cs.create_array({}, shape=(5,), chunks=(2,), dtype=rec, cache="1MiB")
    data = np.array([(i, i / 2) for i in range(5)], dtype=rec)
    r[...] = data
    np.testing.assert_array_equal(r[...], data)
    np.testing.assert_array_equal(r[...], data)


# -- pickling into a subprocess ---------------------------------------------------------------
def _child_reads_and_writes(blob, expected, new_value):
    a = pickle.loads(blob)
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(a[...], expected)
    a[2:5] = new_value
    expected = expected.copy()
    expected[2:5] = new_value
    np.testing.assert_array_equal(a[...], expected)


def test_pickled_cached_array_in_subprocess(tmp_path):
    where = str(tmp_path / "a.zarr")
    shared = ChunkCache("4MiB")
    a = cs.create_array(where, shape=(12,), chunks=(3,), dtype="i4", cache=shared)
    b = cs.open_array(where, cache=shared)
    a[...] = np.arange(12)
    np.testing.assert_array_equal(b[...], np.arange(12))
    a2, b2 = pickle.loads(pickle.dumps((a, b)))
    np.testing.assert_array_equal(a2[...], np.arange(12))
    _in_process(_child_reads_and_writes, pickle.dumps(a), np.arange(12), 77)
    expected = np.arange(12)
    expected[2:5] = 77
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(b[...], expected)
    np.testing.assert_array_equal(b2[...], expected)


# -- threads ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(_stores()))
def test_threads_read_and_write_same_cached_array(tmp_path, kind):
    where = _stores()[kind](tmp_path)
    n_chunks, clen, rounds = 6, 4, 25
    a = cs.create_array(where, shape=(n_chunks * clen,), chunks=(clen,), dtype="i4",
                        fill_value=0, cache="1MiB")
    errors: list[str] = []
    done = threading.Event()

    def writer():
        try:
            for r in range(1, rounds + 1):
                for c in range(n_chunks):
                    a[c * clen:(c + 1) * clen] = r
        finally:
            done.set()

    def reader():
        seen = np.zeros(n_chunks, "i4")
        while not done.is_set():
            got = a[...].reshape(n_chunks, clen)
            for c in range(n_chunks):
                if len(set(got[c].tolist())) != 1:
                    errors.append(f"torn chunk {c}: {got[c]}")
                if got[c, 0] < seen[c]:
                    errors.append(f"chunk {c} went back from {seen[c]} to {got[c, 0]}")
                seen[c] = max(seen[c], got[c, 0])

    threads = [threading.Thread(target=writer), threading.Thread(target=reader),
               threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    np.testing.assert_array_equal(a[...], np.full(n_chunks * clen, rounds, "i4"))
    np.testing.assert_array_equal(cs.open_array(where, cache=0)[...],
                                  np.full(n_chunks * clen, rounds, "i4"))


def test_threads_unaligned_writers_through_one_cached_array(tmp_path):
    where = str(tmp_path / "a.zarr")
    n = 4
    a = cs.create_array(where, shape=(200,), chunks=(7,), dtype="i4", fill_value=-1,
                        cache="1MiB")
    barrier = threading.Barrier(n)

    def writer(k):
        barrier.wait()
        for r in range(3):
            a[k::n] = 10 * r + k
            _ = a[...]

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    expected = (20 + np.arange(200) % n).astype("i4")
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(cs.open_array(where, cache=0)[...], expected)


# -- sharded arrays with cache= ---------------------------------------------------------------
def _rewrite_sharded(where, value):
    a = cs.open_array(where, mode="r+", cache=0)
    a[1:11] = value


def test_sharded_with_cache_foreign_and_local_writers(tmp_path):
    where = str(tmp_path / "s.zarr")
    a = cs.create_array(where, shape=(24,), chunks=(3,), shards=(12,), dtype="i4",
                        fill_value=0, cache="1MiB")
    a[...] = np.arange(24)
    np.testing.assert_array_equal(a[...], np.arange(24))
    expected = np.arange(24)
    _in_process(_rewrite_sharded, where, -4)
    expected[1:11] = -4
    np.testing.assert_array_equal(a[...], expected)
    b = cs.open_array(where, mode="r+", cache=ChunkCache("1MiB"))
    b[10:14] = 5
    expected[10:14] = 5
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(b[...], expected)
    b.resize((5,))
    b.resize((24,))
    expected[5:] = 0
    np.testing.assert_array_equal(cs.open_array(where, cache="1MiB")[...], expected)


def test_pickled_chunkcache_is_empty_with_same_budget():
    # a ChunkCache pickles as an empty cache of the same budget
    cache = ChunkCache("3MiB")
    a = cs.create_array({}, shape=(4,), dtype="i4", cache=cache)
    a[...] = 1
    _ = a[...]
    back = pickle.loads(pickle.dumps(cache))
    assert back.budget == 3 * 2**20 and len(back) == 0


# -- round 3b: after the place/fingerprint keying -------------------------------------------
def _cached_on(root):
    g = cs.group(root)
    a = g.create_array("x", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a[...] = 7
    shared = ChunkCache("1MiB")
    r = cs.open_array(root, path="x", cache=shared)
    np.testing.assert_array_equal(r[...], np.full(8, 7, "i4"))
    return g, r, shared


ROUTES = {
    "del-group-member": lambda root, g: g.__delitem__("x"),
    "open-mode-w": lambda root, g: cs.open_array(root, path="x", mode="w", shape=(8,),
                                                 chunks=(4,), dtype="i4", fill_value=0),
    "create-overwrite": lambda root, g: g.create_array("x", shape=(8,), chunks=(4,),
                                                       dtype="i4", fill_value=0,
                                                       overwrite=True),
    "group-overwrite-root": lambda root, g: cs.group(root, overwrite=True),
    "save-over": lambda root, g: cs.save(root + "/x", np.zeros(8, "i4")),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_node_replaced_same_metadata_reads_fill_not_cached(route):
    root = f"memory://rt3b-{_uid()}"
    g, r, shared = _cached_on(root)
    ROUTES[route](root, g)
    again = cs.open_array(root, path="x", mode="a", shape=(8,), chunks=(4,), dtype="i4",
                          fill_value=0, cache=shared)
    np.testing.assert_array_equal(again[...], np.zeros(8, "i4"))


@pytest.mark.parametrize("op", ["delete_many", "delete_prefix", "set"])
def test_store_level_writes_invalidate_cache(op):
    """Store.delete_many / delete_prefix / set called on the store object of a store
    that is not revalidated per read (fsspec memory://) reach the decoded-chunk cache
    (Store._notify_written)."""
    root = f"memory://rt3b-{_uid()}"
    g, r, shared = _cached_on(root)
    if op == "delete_many":
        g.store.delete_many(["x/c/0", "x/c/1"])
        expected = np.zeros(8, "i4")
    elif op == "delete_prefix":
        g.store.delete_prefix("x/c")
        expected = np.zeros(8, "i4")
    else:
        other = cs.create_array({}, shape=(4,), chunks=(4,), dtype="i4")
        other[...] = [1, 2, 3, 4]
        g.store.set("x/c/0", other.store.get("c/0"))  # a valid chunk, other values
        expected = np.array([1, 2, 3, 4, 7, 7, 7, 7], "i4")
    np.testing.assert_array_equal(r[...], expected)


def test_config_bytes_accept_numpy_integers_like_cache_argument():
    n = np.int64(1 << 20)
    assert ChunkCache(n).budget == 1 << 20
    cs.create_array({}, shape=(2,), dtype="i4", cache=n)
    with cs.config.set({"cache.chunk_bytes": n}):
        assert cs.config.get("cache.chunk_bytes") == 1 << 20


@pytest.mark.parametrize("value,expected", [("64MiB", 64 * 2**20), ("1.5MiB", 1572864),
                                            (0, 0), ("0", 0), (2.0, 2)])
def test_config_chunk_bytes_sizes_taken(value, expected):
    with cs.config.set({"cache.chunk_bytes": value}):
        assert cs.config.get("cache.chunk_bytes") == expected
        a = cs.create_array({}, shape=(10,), chunks=(5,), dtype="i4")
        a[...] = np.arange(10)
        np.testing.assert_array_equal(a[...], np.arange(10))
        a[2] = -2
        np.testing.assert_array_equal(a[...], [0, 1, -2, 3, 4, 5, 6, 7, 8, 9])


@pytest.mark.parametrize("bad", [True, -1, "lots", math.nan, math.inf, None, b"5", "1e3"],
                         ids=repr)
def test_config_bytes_garbage_refused_at_set_naming_key(bad):
    for key in ("cache.chunk_bytes", "threading.write_bytes", "cache.map_bytes",
                "cache.shard_index_bytes"):
        before = cs.config.get(key)
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            cs.config.set({key: bad})
        assert cs.config.get(key) == before  # nothing half-applied


def test_config_set_many_keys_one_bad_changes_nothing():
    before = (cs.config.get("cache.chunk_bytes"), cs.config.get("threading.write_bytes"))
    with pytest.raises(ValueError, match="threading.write_bytes"):
        cs.config.set({"cache.chunk_bytes": "1MiB", "threading.write_bytes": "lots"})
    assert (cs.config.get("cache.chunk_bytes"), cs.config.get("threading.write_bytes")) == before


def test_same_chunk_bytes_two_fingerprints_two_arrays_share_cache():
    # two arrays whose chunk keys and bytes are identical but decode differently
    d = {}
    shared = ChunkCache("1MiB")
    a = cs.create_array(d, shape=(8,), chunks=(4,), dtype="<i4", compressors=None,
                        cache=shared)
    a[...] = np.arange(8, dtype="<i4")
    meta = json.loads(d["zarr.json"])
    meta["data_type"] = "float32"
    meta["fill_value"] = 0.0
    d2 = dict(d)
    d2["zarr.json"] = json.dumps(meta).encode()
    f = cs.open_array(d2, cache=shared)
    for _ in range(2):
        np.testing.assert_array_equal(a[...], np.arange(8))
        np.testing.assert_array_equal(f[...], np.arange(8, dtype="<i4").view("<f4"))


def _zarr_rewrites_zip_in_place(where, value):
    # zarr-python's ZipStore in mode "w" truncates and rewrites the same file (same inode)
    import zarr

    store = zarr.storage.ZipStore(where, mode="w")
    z = zarr.create_array(store, shape=(10,), chunks=(3,), dtype="i2", fill_value=0,
                          compressors=None)
    z[...] = np.full(10, value, "i2")
    store.close()


def _zip_append_in_place(where, key, payload):
    with zipfile.ZipFile(where, "a") as z:
        z.writestr(key, payload)


def test_zip_rewritten_in_place_by_zarr_python_while_reader_lives(tmp_path):
    where = str(tmp_path / "a.zip")
    a = cs.create_array(where, shape=(10,), chunks=(3,), dtype="i2", fill_value=0,
                        compressors=None, cache=0)
    a[...] = 1
    a.store.close()
    r = cs.open_array(where, mode="r", cache=0)
    np.testing.assert_array_equal(r[...], np.ones(10, "i2"))
    ino = os.stat(where).st_ino
    _in_process(_zarr_rewrites_zip_in_place, where, 5)
    assert os.stat(where).st_ino == ino  # really in place
    np.testing.assert_array_equal(r[...], np.full(10, 5, "i2"))
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...],
                                  np.full(10, 5, "i2"))


def test_zip_entry_appended_in_place_while_reader_lives(tmp_path):
    where = str(tmp_path / "a.zip")
    a = cs.create_array(where, shape=(6,), chunks=(3,), dtype="<i2", fill_value=-1,
                        compressors=None, cache=0)
    a[0:3] = 4
    a.store.close()
    r = cs.open_array(where, mode="r", cache=0)
    np.testing.assert_array_equal(r[...], [4, 4, 4, -1, -1, -1])
    _in_process(_zip_append_in_place, where, "c/1", np.array([7, 8, 9], "<i2").tobytes())
    np.testing.assert_array_equal(r[...], [4, 4, 4, 7, 8, 9])


@pytest.mark.parametrize("map_bytes", [1, 4096, 1 << 20])
def test_cache_with_memory_maps_and_in_place_rewrite(tmp_path, map_bytes):
    data = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    with cs.config.set({"cache.map_bytes": map_bytes}):
        where = str(tmp_path / "a.zarr")
        a = cs.create_array(where, shape=data.shape, chunks=(8, 8), dtype="f8",
                            compressors=None, cache="64KiB")
        a[...] = data
        r = cs.open_array(where, mode="r", cache="64KiB")
        for _ in range(3):  # more chunks than either budget holds
            np.testing.assert_array_equal(r[...], data)
            np.testing.assert_array_equal(r[3:61, 5:59], data[3:61, 5:59])
        _in_process(_inplace_same_size, os.path.join(where, "c", "0", "0"),
                    np.full((8, 8), -1.0).tobytes())
        expected = data.copy()
        expected[:8, :8] = -1
        np.testing.assert_array_equal(r[...], expected)
        a[0:8, 0:8] = 5
        expected[:8, :8] = 5
        np.testing.assert_array_equal(r[...], expected)
        np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...], expected)


@pytest.mark.parametrize("kind", ["local", "dict"])
def test_threads_append_through_cached_and_uncached_objects(tmp_path, kind):
    where = str(tmp_path / "a.zarr") if kind == "local" else {}
    a = cs.create_array(where, shape=(0,), chunks=(5,), dtype="i4", fill_value=-1,
                        cache="1MiB")
    objs = [a, cs.open_array(where, cache="1MiB"), cs.open_array(where, cache=0), a]
    barrier = threading.Barrier(4)

    def run(k):
        barrier.wait()
        for r in range(5):
            objs[k].append(np.full(3, 10 * k + r, "i4"))
            _ = objs[k][...]  # fills the caches between appends

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    got = cs.open_array(where, cache=0)[...]
    assert got.shape == (60,)
    blocks = got.reshape(20, 3)
    assert (blocks == blocks[:, :1]).all()  # no block torn or overwritten
    assert sorted(blocks[:, 0].tolist()) == sorted(10 * k + r for k in range(4)
                                                    for r in range(5))
    np.testing.assert_array_equal(cs.open_array(where, cache="1MiB")[...], got)
    np.testing.assert_array_equal(cs.open_array(where, cache=a_cache(a))[...], got)


def test_group_create_array_with_cache_works_or_refuses_cleanly():
    g = cs.group({})
    try:
        a = g.create_array("y", shape=(4,), chunks=(2,), dtype="i4", cache="1MiB")
    except TypeError as e:
        assert "cache" in str(e)
        assert "y" not in [name for name, _ in g.members()]
        return
    a[...] = [1, 2, 3, 4]
    np.testing.assert_array_equal(g["y"][...], [1, 2, 3, 4])
