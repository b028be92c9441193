"""``Array.append(..., new_chunk=True)`` on rectilinear arrays: each appended block a chunk
of its own, added to the grid in the same atomic update as the shape, so streaming ragged
appends never read or rewrite a stored chunk, and concurrent appenders each get one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import chunkstore as cs
from tests.multiproc import run_together

BATCHES = [7, 3, 11, 1, 5, 9, 2, 13]


class Logged(dict):
    """A MemoryStore's mapping that logs every read, write and delete of a key."""

    def __init__(self):
        super().__init__()
        self.reads, self.writes = [], []

    def __getitem__(self, k):
        self.reads.append(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.reads.append(k)
        return super().get(k, default)

    def __setitem__(self, k, v):
        self.writes.append((k, len(bytes(v))))
        super().__setitem__(k, v)

    def __delitem__(self, k):
        self.writes.append((k, 0))
        super().__delitem__(k)

    def clear_log(self):
        self.reads.clear()
        self.writes.clear()


def _chunk_keys(d):
    return {k for k in d if k.startswith("c/")}


def _stream(chunks, new_chunk, shape=(10, 4)):
    """Append BATCHES to an array of ``shape`` (rows i hold value i); per batch the stored
    chunk keys that existed before it and were read or written by it, and bytes written
    to them."""
    d = Logged()
    a = cs.create_array(cs.MemoryStore(d), shape=shape, chunks=chunks, dtype="i4",
                        zarr_format=3, compressors=None, fill_value=-1)
    a[:] = np.repeat(np.arange(shape[0], dtype="i4")[:, None], shape[1], 1)
    touched, rewritten, n = set(), 0, shape[0]
    for b in BATCHES:
        before = _chunk_keys(d)
        d.clear_log()
        a.append(np.repeat(np.arange(n, n + b, dtype="i4")[:, None], shape[1], 1),
                 new_chunk=new_chunk)
        n += b
        hit = ({k for k in d.reads} | {k for k, _ in d.writes}) & before
        touched |= hit
        rewritten += sum(size for k, size in d.writes if k in before)
    return a, touched, rewritten


def _expected(n, width=4):
    return np.repeat(np.arange(n, dtype="i4")[:, None], width, 1)


def test_streaming_ragged_appends_touch_no_stored_chunk():
    a, touched, rewritten = _stream(((6, 4), (2, 2)), new_chunk=True)
    assert touched == set() and rewritten == 0
    assert a.write_chunk_sizes == ((6, 4, *BATCHES), (2, 2))
    np.testing.assert_array_equal(a[:], _expected(10 + sum(BATCHES)))
    reopened = cs.open_array(a.store, mode="r")
    assert reopened.read_chunk_sizes == ((6, 4, *BATCHES), (2, 2))


def test_regular_axis_of_a_rectilinear_grid_spelled_out():
    # axis 0 regular (bare 5) in a rectilinear grid: the new chunk spells it out
    a, touched, rewritten = _stream((5, (2, 2)), new_chunk=True)
    assert touched == set() and rewritten == 0
    assert a.write_chunk_sizes == ((5, 5, *BATCHES), (2, 2))
    np.testing.assert_array_equal(a[:], _expected(10 + sum(BATCHES)))


def test_regular_arrays_unchanged_and_rewrite_their_last_chunk():
    a, touched, rewritten = _stream((8, 4), new_chunk=False)
    assert touched and rewritten > 0  # the shared last chunk is read and rewritten
    assert a.chunks == (8, 4)
    np.testing.assert_array_equal(a[:], _expected(10 + sum(BATCHES)))
    with pytest.raises(ValueError, match="rectilinear"):
        a.append(np.zeros((3, 4), "i4"), new_chunk=True)
    assert a.shape == (10 + sum(BATCHES), 4)
    v2 = cs.create_array(cs.MemoryStore(), shape=(4,), chunks=(2,), dtype="i4", zarr_format=2)
    with pytest.raises(ValueError, match="rectilinear"):
        v2.append(np.zeros(3, "i4"), new_chunk=True)
    assert v2.shape == (4,)


def test_default_follows_zarr_python_resize():
    # zarr-python 3.4: growth past the edges adds one chunk covering it ...
    a = cs.create_array(cs.MemoryStore(), shape=(25,), chunks=((10, 10, 5),), dtype="i4")
    a.append(np.arange(3, dtype="i4"))
    assert a.write_chunk_sizes == ((10, 10, 5, 3),)
    # ... growth within the edges (after a shrink) fills the existing chunks
    a.resize(22)
    a.append(np.arange(4, dtype="i4"))
    assert a.write_chunk_sizes == ((10, 10, 5, 1),)
    np.testing.assert_array_equal(a[22:], np.arange(4))


def test_new_chunk_after_shrink_to_a_chunk_boundary_and_inside_one():
    a = cs.create_array(cs.MemoryStore(), shape=(25,), chunks=((10, 10, 5),), dtype="i4",
                        fill_value=-1)
    a[:] = np.arange(25)
    a.resize(20)  # on a boundary: the trailing chunk is dropped from the grid
    a.append(np.arange(100, 107, dtype="i4"), new_chunk=True)
    assert a.write_chunk_sizes == ((10, 10, 7),)
    np.testing.assert_array_equal(a[:], np.r_[np.arange(20), np.arange(100, 107)])
    a.resize(23)  # inside the last chunk: no chunk of its own without a rewrite
    with pytest.raises(ValueError, match="inside a chunk"):
        a.append(np.arange(2, dtype="i4"), new_chunk=True)
    assert a.shape == (23,) and a.write_chunk_sizes == ((10, 10, 3),)
    assert a.append(np.zeros(0, "i4"), new_chunk=True) == (23,)  # nothing appended


def test_new_chunk_on_other_axis_and_from_empty():
    a = cs.create_array(cs.MemoryStore(), shape=(3, 0), chunks=((3,), (4,)), dtype="i4")
    a.append(np.ones((3, 5), "i4"), axis=1, new_chunk=True)
    a.append(np.full((3, 2), 2, "i4"), axis=-1, new_chunk=True)
    assert a.write_chunk_sizes == ((3,), (5, 2))
    np.testing.assert_array_equal(a[:], np.c_[np.ones((3, 5)), np.full((3, 2), 2)])


def test_sharded_rectilinear_new_shard_must_hold_whole_inner_chunks():
    a = cs.create_array(cs.MemoryStore(), shape=(8,), chunks=(2,), shards=((4, 4),),
                        dtype="i4")
    a.append(np.arange(6, dtype="i4"), new_chunk=True)
    assert a.write_chunk_sizes == ((4, 4, 6),)
    with pytest.raises(ValueError, match="multiple of the inner chunk"):
        a.append(np.arange(3, dtype="i4"), new_chunk=True)
    assert a.shape == (14,)
    np.testing.assert_array_equal(a[8:], np.arange(6))


def _check_concurrent(a, batches_of, n):
    got = a[:]
    sizes = a.write_chunk_sizes[0]
    assert sum(sizes) == len(got) == 4 + sum(sum(batches_of(p)) for p in range(n))
    np.testing.assert_array_equal(got[:4], -2)
    seen, pos = [], 4
    for size in sizes[1:]:  # every chunk after the first holds exactly one batch
        block = got[pos:pos + size]
        assert (block == block[0]).all(), "a batch shares a chunk or was torn"
        seen.append((int(block[0]), size))
        pos += size
    assert sorted(seen) == sorted((100 * p + k, b) for p in range(n)
                                  for k, b in enumerate(batches_of(p)))


def _batches(p):
    return [1 + (3 * p + 5 * k) % 7 for k in range(6)]


def test_threads_each_get_their_own_chunk():
    a = cs.create_array(cs.MemoryStore(), shape=(4,), chunks=((4,),), dtype="i4",
                        fill_value=-1)
    a[:] = -2

    def work(p):
        for k, b in enumerate(_batches(p)):
            a.append(np.full(b, 100 * p + k, "i4"), new_chunk=True)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_concurrent(a, _batches, 4)


def _process_appender(where, proc, start):
    a = cs.open_array(where, mode="r+")
    start.wait()
    for k, b in enumerate(_batches(proc)):
        a.append(np.full(b, 100 * proc + k, "i4"), new_chunk=True)


def test_processes_each_get_their_own_chunk(tmp_path):
    where = str(tmp_path / "r.zarr")
    a = cs.create_array(where, shape=(4,), chunks=((4,),), dtype="i4", fill_value=-1)
    a[:] = -2
    run_together(_process_appender, lambda i: (where, i), 4)
    _check_concurrent(cs.open_array(where, mode="r"), _batches, 4)


def test_regular_axis_too_long_to_spell_out_is_refused():
    with cs.config.set({"metadata.max_elements": 100}):
        b = cs.create_array(cs.MemoryStore(), shape=(1000, 2), chunks=(1, (1, 1)), dtype="i1")
        with pytest.raises(ValueError, match="max_elements"):
            b.append(np.zeros((3, 2), "i1"), new_chunk=True)
        assert b.shape == (1000, 2)
