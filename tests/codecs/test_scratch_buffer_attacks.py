"""Red team, round 4: per-thread scratch buffers (``runtime/scratch.py``), read-ahead
(``io/prefetch.py``) and bounded write batching (``threading.write_bytes``).

Scratch: a result handed to the user must never be a buffer decoded into again later
(read A, read B of the same chunk shape and dtype, A must be unchanged), whatever the
format, codec, partial/fill/sharded chunk, thread, ``out=`` or ``release*()``.
Read-ahead: an error in any prefetched batch reaches the reader (never fill values), the
process's read-ahead threads are reused (none piles up, none is left waiting), and a read beside a writer never returns a torn chunk.
Writes: exact content for every ``write_bytes`` with threads writing one shard.
"""

from __future__ import annotations

import gc
import threading
from dataclasses import replace

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
from chunkstore.io import plain
from chunkstore.io.prefetch import READ_AHEAD_THREADS, ReadAheadThreads
from chunkstore.runtime import current, scratch

CODECS = {
    "v3-none": dict(zarr_format=3, compressors=None),
    "v3-blosc": dict(zarr_format=3, compressors={"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 1, "shuffle": "shuffle"}}),
    "v3-gzip": dict(zarr_format=3, compressors={"name": "gzip", "configuration": {"level": 1}}),
    "v3-zstd": dict(zarr_format=3, compressors={"name": "zstd", "configuration": {"level": 1}}),
    "v3-sharded-zstd": dict(zarr_format=3, shards=(8, 6), compressors={
        "name": "zstd", "configuration": {"level": 1}}),
    "v3-sharded-none": dict(zarr_format=3, shards=(8, 6), compressors=None),
    "v2-blosc": dict(zarr_format=2, compressors="auto"),
    "v2-zlib": dict(zarr_format=2, compressor={"id": "zlib", "level": 1}),
    "v2-none": dict(zarr_format=2, compressor=None),
    "v2-F-order": dict(zarr_format=2, order="F", compressor={"id": "zstd", "level": 1}),
}


def _make(store, kind, values, dtype="i4", fill_value=-7):
    kw = dict(CODECS[kind])
    a = cs.create_array(store, shape=values.shape, chunks=(4, 3), dtype=dtype,
                        fill_value=fill_value, cache=0, **kw)
    a[...] = values
    return a


@pytest.mark.parametrize("store_kind", ["local", "memory"])
@pytest.mark.parametrize("kind", sorted(CODECS))
def test_result_never_aliases_a_reused_decode_buffer(tmp_path, kind, store_kind):
    def store(name):
        return str(tmp_path / name) if store_kind == "local" else cs.MemoryStore()

    va = np.arange(10 * 7, dtype="i4").reshape(10, 7)
    vb = -np.arange(10 * 7, dtype="i4").reshape(10, 7) - 1
    a = _make(store("a.zarr"), kind, va)
    b = _make(store("b.zarr"), kind, vb)
    a[8:, :] = -7  # the last row of chunks is all fill: not stored
    va[8:, :] = -7
    reads = {
        "partial": lambda x: x[1:3, 1:2],
        "one-element-row": lambda x: x[5],
        "column": lambda x: x[:, 4],
        "whole": lambda x: x[...],
        "fill-chunk": lambda x: x[8:10, 0:3],
        "edge": lambda x: x[8:, 6:],
        "strided": lambda x: x[::3, ::2],
        "fancy": lambda x: x.oindex[[9, 0, 4], [6, 1]],
        "points": lambda x: x.vindex[[1, 5, 9], [0, 3, 6]],
        "block": lambda x: x.blocks[1, 2],
        "chunk": lambda x: x.read_chunk((1, 1)) if hasattr(x, "read_chunk") else x[4:8, 3:6],
    }
    for name, read in reads.items():
        got_a = read(a)
        keep = np.array(got_a, copy=True)
        got_b = read(b)  # same shapes and dtype: the same thread's scratch, if any
        np.testing.assert_array_equal(got_a, keep, err_msg=f"{name}: A changed by reading B")
        _ = read(a), read(b)
        scratch.release()
        _ = read(b)
        np.testing.assert_array_equal(got_a, keep, err_msg=f"{name}: after release()")
        assert not np.shares_memory(got_a, got_b)


@pytest.mark.parametrize("kind", ["v3-blosc", "v3-sharded-zstd", "v2-zlib", "v2-F-order"])
def test_out_argument_not_contiguous_and_results_across_threads(kind):
    values = np.arange(12 * 9, dtype="i4").reshape(12, 9)
    arrays = [_make(cs.MemoryStore(), kind, values * (k + 1)) for k in range(4)]
    results: dict[tuple[int, int], np.ndarray] = {}
    barrier = threading.Barrier(4)

    def run(k):
        barrier.wait()
        for r in range(5):
            results[(k, r)] = arrays[(k + r) % 4][1:11, 2:8]
            if r == 2:
                scratch.release_all()  # another thread's buffers dropped mid-flight

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for (k, r), got in results.items():
        np.testing.assert_array_equal(got, (values * ((k + r) % 4 + 1))[1:11, 2:8])
    out = np.zeros((12, 9), "i4", order="F")  # a non-C-contiguous destination
    arrays[1].get_basic_selection(Ellipsis, out=out)
    np.testing.assert_array_equal(out, values * 2)
    out2 = np.zeros((24, 9), "i4")[::2]  # strided destination
    arrays[2].get_basic_selection(Ellipsis, out=out2)
    np.testing.assert_array_equal(out2, values * 3)
    np.testing.assert_array_equal(out, values * 2)


def test_staged_encode_input_reused_between_chunks_of_one_write(tmp_path):
    """Big-endian data with a compressor is staged (byte-swapped) into a reused buffer per
    chunk: every chunk must be encoded from its own values."""
    values = np.arange(20 * 6, dtype=">i8").reshape(20, 6) * 1_000_003
    for fmt in (2, 3):
        a = cs.create_array(str(tmp_path / f"s{fmt}.zarr"), shape=values.shape,
                            chunks=(3, 4), dtype="<i8", zarr_format=fmt, cache=0)
        a[...] = values  # a different byte order than the array's
        a[::2, 1] = values[::2, 1] + 1  # partial chunks: decode, modify, stage, encode
        expected = values.astype("<i8")
        expected[::2, 1] += 1
        np.testing.assert_array_equal(a[...], expected)
        zarr = pytest.importorskip("zarr")
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / f"s{fmt}.zarr"),
                                                      mode="r")[...], expected)


def test_dask_tasks_releasing_scratch_while_main_thread_reads():
    dask = pytest.importorskip("dask")
    import chunkstore.dask as csd

    values = np.arange(40 * 30, dtype="f8").reshape(40, 30)
    a = cs.create_array(cs.MemoryStore(), shape=values.shape, chunks=(5, 5), dtype="f8",
                        compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = values
    held = a[3:7, 3:7]  # partial chunk: decoded through this thread's scratch
    keep = held.copy()
    with dask.config.set(scheduler="threads", num_workers=2):
        out = csd.to_store(csd.from_store(a) * 2, cs.MemoryStore(), chunks=(5, 5))
    np.testing.assert_array_equal(out[...], values * 2)
    np.testing.assert_array_equal(held, keep)
    again = a[3:7, 3:7]
    np.testing.assert_array_equal(held, keep)
    assert not np.shares_memory(held, again)


# -- read-ahead -----------------------------------------------------------------------------
class _Failing(dict):
    """A dict store whose lookups of some keys fail (an endpoint error mid-read)."""

    def __init__(self, *a, bad=(), error=OSError, **kw):
        super().__init__(*a, **kw)
        self.bad, self.error = set(bad), error

    def get(self, key, default=None):
        if key in self.bad:
            raise self.error(f"endpoint failed for {key}")
        return super().get(key, default)

    def __getitem__(self, key):
        if key in self.bad:
            raise self.error(f"endpoint failed for {key}")
        return super().__getitem__(key)


def _read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("cs-read-ahead")]


class _RemoteMemory(cs.MemoryStore):
    # read as S3 is: through the fetch path, several batches ahead on read-ahead threads
    capabilities = replace(cs.MemoryStore.capabilities, remote=True, zero_copy_views=False)


@pytest.mark.parametrize("bad_chunk", [0, 1, 17, 39])
@pytest.mark.parametrize("compressors", [None, "auto"])
@pytest.mark.parametrize("remote", [False, True])
def test_error_in_any_prefetched_batch_reaches_the_reader(monkeypatch, bad_chunk, compressors,
                                                          remote):
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 0)  # batches of 2 x threads chunks
    monkeypatch.setattr(plain, "REMOTE_BATCH_BYTES", 0)
    d = _Failing()
    a = cs.create_array(_RemoteMemory(d) if remote else d, shape=(40 * 64,), chunks=(64,),
                        dtype="f8", compressors=compressors, fill_value=0.0)
    values = np.arange(40 * 64, dtype="f8") + 1
    a[...] = values
    assert sorted(d) == sorted(["zarr.json"] + [f"c/{i}" for i in range(40)])
    d.bad = {f"c/{bad_chunk}"}
    current().part(ReadAheadThreads).close()  # threads of earlier reads: not this test's
    before = set(_read_ahead_threads())
    for sel in (slice(None), slice(5, None, 3), slice(bad_chunk * 64 + 3, bad_chunk * 64 + 9)):
        with pytest.raises(Exception) as info:
            a[sel]
        assert f"c/{bad_chunk}" in str(info.value) or isinstance(info.value, OSError)
        del info
    d.bad = set()
    np.testing.assert_array_equal(a[...], values)
    gc.collect()
    started = [t for t in _read_ahead_threads() if t not in before]
    assert bool(started) == remote  # a remote store's reads fetch ahead on them
    # the process's read-ahead threads are reused, never more than READ_AHEAD_THREADS
    assert len(_read_ahead_threads()) <= READ_AHEAD_THREADS
    np.testing.assert_array_equal(a[...], values)
    assert not [t for t in _read_ahead_threads() if t not in before and t not in started]
    # closed, each ends (a thread left waiting on a fetch would fail here, not linger)
    current().part(ReadAheadThreads).close()
    for t in started:
        t.join(60)
    assert not [t for t in started if t.is_alive()]


def test_corrupt_chunk_in_a_later_batch_is_chunk_decode_error(monkeypatch):
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 0)
    d = {}
    a = cs.create_array(d, shape=(30 * 32,), chunks=(32,), dtype="i4",
                        compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = np.arange(30 * 32)
    d["c/27"] = b"\x00garbage" * 3
    with pytest.raises(ChunkDecodeError, match="c/27"):
        a[...]
    np.testing.assert_array_equal(a[:27 * 32], np.arange(27 * 32))


def test_multi_batch_reads_beside_a_writer_never_tear_a_chunk(monkeypatch):
    monkeypatch.setattr(plain, "READ_BATCH_BYTES", 0)
    n_chunks, clen, rounds = 48, 16, 15
    a = cs.create_array(cs.MemoryStore(), shape=(n_chunks * clen,), chunks=(clen,),
                        dtype="i4", fill_value=0, compressors=None, cache=0)
    errors: list[str] = []
    done = threading.Event()

    def writer():
        try:
            for r in range(1, rounds + 1):
                a[...] = r  # whole chunks: each replaced atomically
        finally:
            done.set()

    def reader():
        while not done.is_set():
            got = a[...].reshape(n_chunks, clen)
            torn = [c for c in range(n_chunks) if len(set(got[c].tolist())) != 1]
            if torn:
                errors.append(f"torn chunks {torn[:3]}: {got[torn[0]]}")
            part = a[3::5].reshape(-1)  # ranged reads of uncompressed chunks
            if part.size and not set(part.tolist()) <= set(range(rounds + 1)):
                errors.append(f"values never written: {sorted(set(part.tolist()))[:5]}")

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    np.testing.assert_array_equal(a[...], np.full(n_chunks * clen, rounds, "i4"))


# -- write batching ---------------------------------------------------------------------------
@pytest.mark.parametrize("write_bytes", [1, 100, "4KiB", "1GiB"])
def test_threads_write_one_shard_exact_for_any_write_bytes(tmp_path, write_bytes):
    with cs.config.set({"threading.write_bytes": write_bytes}):
        where = str(tmp_path / "s.zarr")
        a = cs.create_array(where, shape=(64, 10), chunks=(4, 5), shards=(64, 10),
                            dtype="i4", fill_value=-1, cache=0,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
        barrier = threading.Barrier(4)

        def run(k):
            barrier.wait()
            a[k::4, :] = k + 100  # rows interleaved across every inner chunk
            barrier.wait()
            a[16 * k:16 * k + 16, 3] = -(k + 1)  # then an unaligned column band

        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        expected = np.empty((64, 10), "i4")
        for k in range(4):
            expected[k::4, :] = k + 100
        for k in range(4):
            expected[16 * k:16 * k + 16, 3] = -(k + 1)
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(cs.open_array(where, cache=0)[...], expected)
