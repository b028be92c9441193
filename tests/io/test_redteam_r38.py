"""Red team r38: the decoded-chunk cache's in-place path for unsettled files (d847713),
the shard region fast paths (ShardIO._read_region/_place/_region_unit) and overlong key
components in LocalStore (2f4ecfd, d2f2f81).

The two tests of overlong key writes failed on the commit attacked (d57ab6c: a raw
``OSError`` naming neither the key nor the store); the others are the attacks that held,
kept as guards. Every read is compared with exact content."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import random
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache

LONG = "q" * 300  # longer than any file name ext4/tmpfs/xfs accept (255 bytes)


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


# -- 3. overlong key components ----------------------------------------------------------
@pytest.mark.parametrize("key", [f"n/{LONG}/k", f"ok/{LONG}", f"{LONG}/zarr.json"])
def test_overlong_key_write_refusal_names_the_key(tmp_path, key):
    """A write of a key with a component longer than a file name may be is refused with
    ``OSError(ENAMETOOLONG)`` naming the key and the store (it named only the component,
    or a temporary file '-> component'), and nothing else changes."""
    store = cs.LocalStore(tmp_path / "s.zarr")
    store.set("ok/x", b"1")
    with pytest.raises(OSError) as info:
        store.set(key, b"x")
    assert info.value.errno == errno.ENAMETOOLONG
    assert key in str(info.value), str(info.value).replace(LONG, "<LONG>")
    assert store.get("ok/x") == b"1"


def test_group_create_array_with_overlong_name_names_the_node(tmp_path):
    """``Group.create_array('sub/<300 chars>')`` is refused naming the node path and the
    store (it raised a bare ``OSError(36, 'File name too long')``), before any directory
    is made for it (it left an empty 'sub' behind)."""
    where = tmp_path / "g.zarr"
    g = cs.group(str(where))
    g.create_array("keep", data=np.arange(5))
    with pytest.raises(OSError) as info:
        g.create_array(f"sub/{LONG}", shape=(3,), dtype="i4")
    assert f"sub/{LONG}" in str(info.value), str(info.value).replace(LONG, "<LONG>")
    assert str(where) in str(info.value)
    assert not (where / "sub").exists()
    assert sorted(p.name for p in where.iterdir()) == ["keep", "zarr.json"]


def test_overlong_keys_read_missing_delete_noop_and_keep_other_keys(tmp_path):
    """Held: every read method answers 'missing' for an overlong key, deletes are no-ops,
    and the other keys, listings, groups and consolidation are untouched."""
    store = cs.LocalStore(tmp_path / "s.zarr")
    store.set("ok/x", b"1")
    for key in (LONG, f"ok/{LONG}", f"{LONG}/x"):
        assert store.get(key) is None and not store.exists(key)
        assert store.getsize(key) is None
        assert store.get_many([key, "ok/x"]) == [None, b"1"]
        assert [None if v is None else bytes(v) for v in store.get_views([key, "ok/x"])] == [
            None, b"1"]
        assert store.cache_tokens([key])[0] is None
        assert list(store.list_prefix(key)) == [] and list(store.list_dir(key)) == []
        store.delete(key)
        store.delete_many([key])
        store.delete_prefix(key + "/")
    assert sorted(store.list_prefix("")) == ["ok/x"]
    g = cs.group(str(tmp_path / "g.zarr"))
    g.create_array("keep", data=np.arange(5))
    cs.consolidate_metadata(str(tmp_path / "g.zarr"))
    assert LONG not in g and f"keep/{LONG}" not in g
    with pytest.raises(KeyError):
        g[LONG]
    with pytest.raises(cs.errors.NodeNotFoundError if hasattr(cs, "errors") else Exception):
        cs.open(str(tmp_path / "g.zarr"), mode="r", path=LONG)
    g2 = cs.open_group(str(tmp_path / "g.zarr"), mode="r")
    assert sorted(dict(g2.members())) == ["keep"]
    np.testing.assert_array_equal(g2["keep"][:], np.arange(5))


# -- 1. the decoded-chunk cache with fresh (unsettled) files ------------------------------
SHAPE = (24, 24)


def _rewrite_whole(where, base, n):
    a = cs.open_array(where, mode="r+", cache=0)
    for i in range(n):
        a[:] = np.full(SHAPE, float(base + i))


def _uniform_units(x, unit, allowed):
    for i in range(0, x.shape[0], unit):
        for j in range(0, x.shape[1], unit):
            blk = x[i:i + unit, j:j + unit]
            assert (blk == blk.flat[0]).all(), (i, j, np.unique(blk))
            assert float(blk.flat[0]) in allowed, (i, j, blk.flat[0])


@pytest.mark.parametrize("sharded", [False, True])
def test_cached_reads_through_symlink_while_another_process_rewrites(tmp_path, sharded):
    """Held: a cached reader (read-only, 3 s window: every file unsettled) and a cached
    writer through a symlinked root, while a spawned process rewrites every chunk with
    same-size raw chunks: each chunk (each shard, sharded) of each read is one written
    version, and after the writers stop, a write here is read back exactly through both."""
    where = str(tmp_path / "d" / "a.zarr")
    os.makedirs(tmp_path / "d")
    os.symlink(tmp_path / "d", tmp_path / "link")
    a0 = cs.create_array(where, shape=SHAPE, dtype="f8", chunks=(4, 4),
                         shards=(8, 8) if sharded else None, compressors=None,
                         fill_value=-1, cache=0)
    a0[:] = 0.0
    reader = cs.open_array(where, mode="r", cache="8MiB")
    other = cs.open_array(str(tmp_path / "link" / "a.zarr"), mode="r+", cache="8MiB")
    allowed = {0.0, *map(float, range(1000, 1040)), *map(float, range(5000, 5400))}
    p = mp.get_context("spawn").Process(target=_rewrite_whole, args=(where, 1000, 40))
    p.start()
    k, t0 = 5000, time.time()
    try:
        while (p.is_alive() or k < 5010) and time.time() - t0 < 12:
            _uniform_units(reader[:], 8 if sharded else 4, allowed)
            other[8:16, 8:16] = float(k)
            k += 1
            _uniform_units(other[:], 8 if sharded else 4, allowed)
    finally:
        p.join(30)
    assert p.exitcode == 0
    other[:] = 7.0
    expected = np.full(SHAPE, 7.0)
    np.testing.assert_array_equal(reader[:], expected)
    a0[:4, :4] = 9.0
    expected[:4, :4] = 9.0
    np.testing.assert_array_equal(reader[:], expected)
    np.testing.assert_array_equal(other[:], expected)


# -- 2. shard region fast paths -----------------------------------------------------------
def _values(rng, dt, shape):
    if dt.names:
        x = np.zeros(shape, dt)
        x["a"], x["b"] = rng.integers(-5, 5, shape), rng.random(shape)
        return x
    x = rng.integers(0, 4, shape).astype(dt)
    if dt.kind == "f":
        x[rng.random(shape) < 0.3] = np.nan
    return x


@pytest.mark.parametrize("seed", range(3))
def test_region_paths_match_numpy_and_zarr(tmp_path, seed):
    """Held: random 1-3-d shapes (not multiples of shards or inner chunks), big-endian and
    structured dtypes, NaN fill, all-fill inner chunks, write_empty_chunks both ways,
    index at start or end; region writes (whole shards or not) and region reads starting
    and stopping mid inner chunk equal NumPy, and zarr-python reads the same."""
    import zarr

    rng, rnd = np.random.default_rng(seed), random.Random(seed)
    for it in range(20):
        nd = rnd.choice([1, 2, 3])
        chunks = tuple(rnd.choice([1, 2, 3]) for _ in range(nd))
        shards = tuple(c * rnd.choice([1, 2, 3]) for c in chunks)
        shape = tuple(rnd.randint(1, 3 * s + 2) for s in shards)
        dt = np.dtype(rnd.choice(["<i4", ">i4", "f8", ">f4", "u1", [("a", "<i2"), ("b", ">f8")]]))
        kw = dict(shape=shape, dtype=dt, chunks=chunks, compressors=rnd.choice([None, "auto"]),
                  shards={"shape": shards, "index_location": rnd.choice(["start", "end"])},
                  config={"write_empty_chunks": rnd.random() < 0.3})
        if not dt.names:
            kw["fill_value"] = np.nan if dt.kind == "f" and rnd.random() < 0.6 else 1
        where = str(tmp_path / f"{seed}-{it}.zarr")
        a = cs.create_array(where, **kw)
        ref = np.zeros(shape, dt) if dt.names else np.full(shape, a.fill_value, dt)
        for _ in range(4):
            if rnd.random() < 0.5:
                sl = tuple(slice(0, n // s * s or n) for n, s in zip(shape, shards, strict=True))
            else:
                sl = tuple(slice(*sorted(rnd.sample(range(n + 1), 2))) if n > 1 else slice(0, 1)
                           for n in shape)
            v = _values(rng, dt, ref[sl].shape)
            if not dt.names and rnd.random() < 0.3:
                v[...] = a.fill_value
            a[sl] = v
            ref[sl] = v
        for _ in range(6):
            sl = tuple(slice(*sorted(rnd.sample(range(n + 1), 2))) if n > 1 else slice(0, 1)
                       for n in shape)
            assert np.array_equal(a[sl], ref[sl], equal_nan=not dt.names), (it, kw, sl)
        assert np.array_equal(a[...], ref, equal_nan=not dt.names), (it, kw)
        if not dt.names:  # zarr-python 3.1 reads only the legacy 'structured' (README)
            assert np.array_equal(zarr.open_array(where, mode="r")[...], ref, equal_nan=True)


def _shard_writer(where, k, rounds):
    a = cs.open_array(where, mode="r+")
    for r in range(rounds):
        for s in range(2):  # inner chunk column k of both shards of row 0: partial shards
            a[0:8, s * 16 + k * 4:s * 16 + k * 4 + 4] = k * 1000 + r
        if k < 2:  # a whole shard of row 1: the region fast path
            a[8:16, k * 16:(k + 1) * 16] = np.full((8, 16), k * 1000 + r, ">i4")


def test_four_processes_write_distinct_inner_chunks_of_the_same_shards(tmp_path):
    """Held: 4 processes write distinct inner chunks of the same two shards (read-modify-
    write) while two of them also replace whole other shards: nothing is lost."""
    where = str(tmp_path / "a.zarr")
    a = cs.create_array(where, shape=(16, 32), dtype=">i4", chunks=(8, 4), shards=(8, 16),
                        fill_value=-1)
    rounds = 10
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_shard_writer, args=(where, k, rounds)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    expected = np.full((16, 32), -1, ">i4")
    for k in range(4):
        for s in range(2):
            expected[0:8, s * 16 + k * 4:s * 16 + k * 4 + 4] = k * 1000 + rounds - 1
    for k in range(2):
        expected[8:16, k * 16:(k + 1) * 16] = k * 1000 + rounds - 1
    np.testing.assert_array_equal(a[:], expected)
