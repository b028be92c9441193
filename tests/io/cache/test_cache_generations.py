"""The decoded-chunk cache never serves a chunk file replaced behind its back, even when
the replacement repeats the file's (device, inode, size, mtime) (issue 30, item 3).

The attack is a foreign writer (raw ``os`` calls, as another process or implementation
would) replacing a chunk twice by temporary file + rename: ext4 hands the freed inode
number back to the second temporary file, and ``os.utime`` restores the old mtime (what
a coarse timestamp does by itself when both replacements fall in one tick). Every read
is compared with the exact values on disk.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache

ROUNDS = 10
SECOND = 1_000_000_000


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


class CoarseStore(cs.LocalStore):
    """A LocalStore that sees its files as a file system with whole-second timestamps
    shows them (ext3, ext4 with 128-byte inodes, HFS+): every stat this store takes of
    its files and its probes, truncated."""

    @staticmethod
    def _version(st):
        v = cs.LocalStore._version(st)
        return v._replace(mtime_ns=v.mtime_ns // SECOND * SECOND,
                          ctime_ns=v.ctime_ns // SECOND * SECOND)


def _arrays(tmp_path, sharded, store_type=cs.LocalStore):
    """The array under test (its own cache) and a twin with the same metadata elsewhere,
    whose chunk files give the foreign writer its payloads."""
    kw = dict(shape=(8, 8), dtype="f8", chunks=(2, 2) if sharded else (4, 4),
              shards=(4, 4) if sharded else None, compressors=None, fill_value=0)
    cache = ChunkCache(2**20)
    a = cs.create_array(store_type(tmp_path / "a.zarr"), cache=cache, **kw)
    twin = cs.create_array(cs.LocalStore(tmp_path / "twin.zarr"), cache=0, **kw)
    a[:] = 0.5  # every chunk stored
    return a, twin, cache


def _payload(twin, value):
    """The stored bytes of chunk (0, 0) (of shard (0, 0): 4 inner chunks) of ``twin``
    holding ``value`` everywhere (the same size whatever the value: raw chunks)."""
    twin[:4, :4] = value
    with open(os.path.join(twin.store.root, twin.chunk_key((0, 0))), "rb") as f:
        return f.read()


def _foreign_write(path, data, inode=None, mtime_ns=None):
    """Replace ``path`` by temporary file + rename; with ``inode``, the temporary file
    must get that inode number (more are made until one does; None if none does) and
    with ``mtime_ns`` its mtime is set to it before the rename."""
    made = []
    try:
        for n in range(64 if inode is not None else 1):
            tmp = f"{path}.foreign-{n}"
            with open(tmp, "wb") as f:
                f.write(data)
            made.append(tmp)
            if inode is None or os.stat(tmp).st_ino == inode:
                break
        else:
            return None
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        os.replace(tmp, path)
        made.remove(tmp)
        return os.stat(path)
    finally:
        for other in made:
            os.unlink(other)


def _cached_read(a, cache, expected, n_entries):
    """Read ``a`` until its chunks are kept (a file is kept once its timestamps are too
    old to be repeated by a later change; polled, bounded); each read is checked."""
    deadline = time.monotonic() + 10
    while True:
        np.testing.assert_array_equal(a[:], expected)
        if len(cache) >= n_entries:
            return
        assert time.monotonic() < deadline, "the chunks were never kept"
        time.sleep(0.002)


def _sig(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _rounds(a, twin, path, before_replacing):
    """:data:`ROUNDS` rounds of: the foreign writer puts version A of chunk (0, 0),
    ``before_replacing(expected)`` reads it, then B and C replace it, C with A's inode
    number and mtime (a round is tried again when another process took the freed inode
    number first); the rounds whose read after C was not exactly C."""
    stale = []
    for r in range(ROUNDS):
        v_a, v_b, v_c = 3.0 * r + 1, 3.0 * r + 2, 3.0 * r + 3
        payloads = [_payload(twin, v) for v in (v_a, v_b, v_c)]
        expected = np.full((8, 8), 0.5)
        for _ in range(5):
            expected[:4, :4] = v_a
            st_a = _foreign_write(path, payloads[0])
            before_replacing(expected)
            _foreign_write(path, payloads[1])
            st_c = _foreign_write(path, payloads[2], inode=st_a.st_ino,
                                  mtime_ns=st_a.st_mtime_ns)
            if st_c is not None:
                break
        else:
            pytest.skip("this file system did not hand the freed inode number back, so "
                        "(device, inode, size, mtime) cannot be made to repeat here")
        assert _sig(st_c) == _sig(st_a)  # what the old token was made of: all equal
        with open(path, "rb") as f:
            assert f.read() == payloads[2]
        expected[:4, :4] = v_c
        if not np.array_equal(a[:], expected) or not (a[:4, :4] == v_c).all():
            stale.append(r)
    return stale


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_a_chunk_replaced_twice_with_the_same_stat_is_never_stale(tmp_path, sharded):
    """The chunk (shard) was kept; it is replaced twice so that (device, inode, size,
    mtime) come back; the next read gives the new values, 10 of 10."""
    a, twin, cache = _arrays(tmp_path, sharded)
    path = os.path.join(a.store.root, a.chunk_key((0, 0)))
    n = 16 if sharded else 4
    stale = _rounds(a, twin, path, lambda expected: _cached_read(a, cache, expected, n))
    assert not stale, f"stale reads in rounds {stale}: {len(stale)} of {ROUNDS}"


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_an_in_place_rewrite_that_restores_the_mtime_is_seen(tmp_path, sharded):
    """Same size, same inode, mtime put back: the change time (ctime) still moved."""
    a, twin, cache = _arrays(tmp_path, sharded)
    path = os.path.join(a.store.root, a.chunk_key((0, 0)))
    expected = np.full((8, 8), 0.5)
    _cached_read(a, cache, expected, 16 if sharded else 4)
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(_payload(twin, 7.0))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _sig(os.stat(path)) == _sig(st)
    expected[:4, :4] = 7.0
    np.testing.assert_array_equal(a[:], expected)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_whole_second_timestamps_replaced_twice_within_a_second(tmp_path, sharded):
    """On a file system with 1 s timestamps (and so 1 s ctimes: the replacements within
    one second repeat all of the stat) a chunk file changed within its window is read
    but not kept, so no entry can be served for it after a replacement: 10 of 10
    reads exact."""
    a, twin, cache = _arrays(tmp_path, sharded, CoarseStore)
    path = os.path.join(a.store.root, a.chunk_key((0, 0)))
    window = cache.stamps.window(a.store, os.stat(path).st_dev)
    assert window >= SECOND  # measured: whole-second stamps
    others = 12 if sharded else 3  # the entries of the chunks not replaced, at most

    def read(expected):
        np.testing.assert_array_equal(a[:], expected)
        assert len(cache) <= others  # chunk (0, 0) changed too recently to be kept

    stale = _rounds(a, twin, path, read)
    assert not stale, f"stale reads in rounds {stale}: {len(stale)} of {ROUNDS}"


class CountingStore(cs.LocalStore):
    """Counts the chunk files read whole (what a cache hit avoids)."""

    fetched = 0

    def get_many(self, keys, max_bytes=None):
        type(self).fetched += len(keys)
        return super().get_many(keys, max_bytes)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_files_older_than_the_window_are_still_served_from_the_cache(tmp_path, sharded):
    """The rule keeps the cache's speed: once a file's timestamps are older than its
    file system's measured window, every re-read is a hit (one stat, no read)."""
    a, _, cache = _arrays(tmp_path, sharded, CountingStore)
    expected = np.full((8, 8), 0.5)
    window = cache.stamps.window(a.store, os.stat(a.store.root).st_dev)
    assert window < SECOND  # this machine's file system: fine stamps, measured
    _cached_read(a, cache, expected, 16 if sharded else 4)
    CountingStore.fetched = 0
    for _ in range(5):
        np.testing.assert_array_equal(a[:], expected)
    assert CountingStore.fetched == 0


def test_the_probe_leaves_nothing_and_read_only_stores_do_not_probe(tmp_path):
    a, _, cache = _arrays(tmp_path, False)
    before = sorted(os.listdir(a.store.root))
    dev = os.stat(a.store.root).st_dev
    assert cache.stamps.window(a.store, dev) < SECOND
    assert sorted(os.listdir(a.store.root)) == before  # probe files removed
    ro = cs.LocalStore(a.store.root, read_only=True)
    other = ChunkCache(2**20)
    mtime = os.stat(a.store.root).st_mtime_ns
    assert other.stamps.window(ro, dev) == chunk_cache.DEFAULT_WINDOW_NS
    assert os.stat(a.store.root).st_mtime_ns == mtime  # nothing written
    # a device other than the probed root's: the default
    assert cache.stamps.window(a.store, dev + 1) == chunk_cache.DEFAULT_WINDOW_NS


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_files_too_fresh_to_keep_are_read_in_place_not_decoded_for_the_cache(
        tmp_path, sharded):
    """A read-only store cannot measure its window (the default, 3 s, applies): chunks
    written a moment ago are not kept, so the cache must not cost anything either. They
    are read the plain way, decoded straight into the result (no new array per chunk
    decoded for an entry that is then dropped); every read exact."""
    a, _, _ = _arrays(tmp_path, sharded)
    a[:] = np.arange(64.0).reshape(8, 8)
    cache = ChunkCache(2**20)
    ro = cs.open_array(cs.LocalStore(a.store.root, read_only=True), mode="r", cache=cache)
    unit = ro._engine.io_of()
    codec = unit.inner if sharded else unit.codec
    decoded = []
    real = codec.decode

    def decode(label, blob, out=None, **kw):
        if out is None:  # into a new array (what an entry is made of)
            decoded.append(label)
        return real(label, blob, out=out, **kw)

    codec.decode = decode
    for _ in range(3):
        np.testing.assert_array_equal(ro[:], np.arange(64.0).reshape(8, 8))
        np.testing.assert_array_equal(ro[1:7, 3:5], np.arange(64.0).reshape(8, 8)[1:7, 3:5])
    assert decoded == []
    assert len(cache) == 0
