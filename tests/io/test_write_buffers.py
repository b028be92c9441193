"""What a write holds between encoding and storing: compressor input staged in a reused
per-thread buffer (exact bytes whatever the value's layout or byte order), scratch that is
released or never kept when large, and ``threading.write_bytes`` bounding the encoded
chunks in flight."""

import os
import threading

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io import chunk_codec
from chunkstore.runtime import scratch


@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("layout", ["block", "reversed", "fortran"])
def test_staged_compressor_input_gives_the_chunk_bytes(tmp_path, endian, layout):
    rng = np.random.default_rng(1)
    x = rng.integers(-2**31, 2**31 - 1, size=(64, 96), dtype="i4")
    value = {"block": x, "reversed": np.ascontiguousarray(x[::-1])[::-1],
             "fortran": np.asfortranarray(x)}[layout]
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=x.shape, chunks=(16, 32), dtype="i4",
                        codecs=[{"name": "bytes", "configuration": {"endian": endian}},
                                {"name": "zstd", "configuration": {"level": 1}}])
    a[...] = value
    np.testing.assert_array_equal(a[...], x)
    stored = (tmp_path / "a.zarr" / a.chunk_key((1, 2))).read_bytes()
    raw = numcodecs.Zstd().decode(stored)
    want = np.ascontiguousarray(x[16:32, 64:96]).astype(">i4" if endian == "big" else "<i4")
    assert bytes(raw) == want.tobytes()


def test_staged_v2_compressor_input(tmp_path):
    x = np.arange(64 * 96, dtype=">f8").reshape(64, 96)
    a = cs.create_array(str(tmp_path / "v2.zarr"), shape=x.shape, chunks=(16, 32), dtype=">f8",
                        zarr_format=2, compressors=numcodecs.Blosc("lz4"))
    a[...] = x  # every chunk a strided block of the value
    np.testing.assert_array_equal(a[...], x)
    stored = (tmp_path / "v2.zarr" / "1.2").read_bytes()
    assert bytes(numcodecs.Blosc().decode(stored)) == x[16:32, 64:96].tobytes()


def test_scratch_reused_released_and_large_not_kept(monkeypatch):
    got = {}

    def worker():
        first = scratch.scratch_buffer((8, 8), np.float32, "encode")
        got["same"] = scratch.scratch_buffer((8, 8), np.float32, "encode") is first
        got["other_purpose"] = scratch.scratch_buffer((8, 8), np.float32) is not first
        got["held"] = scratch.held_bytes()
        scratch.release()
        got["after"] = scratch.held_bytes()
        monkeypatch.setattr(scratch, "KEEP_MAX_BYTES", 1024)
        big = scratch.scratch_buffer((64, 64), np.float64, "decode")
        got["big_kept"] = scratch.scratch_buffer((64, 64), np.float64, "decode") is big
        got["big_held"] = scratch.held_bytes()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got == {"same": True, "other_purpose": True, "held": 2 * 256, "after": 0,
                   "big_kept": False, "big_held": 0}


@pytest.mark.parametrize("budget_chunks", [1, 3, 4])
def test_write_bytes_bounds_encoded_chunks_in_flight(monkeypatch, budget_chunks):
    chunk = (64, 64)
    nbytes = 64 * 64 * 8
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=(64 * 8, 64 * 8), chunks=chunk, dtype="f8")
    lock, state = threading.Lock(), {"now": 0, "peak": 0}
    encode = chunk_codec.ChunkCodec.encode

    def counting_encode(self, c, *rest):
        out = encode(self, c, *rest)
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        return out

    commit = type(store).commit_many

    def counting_commit(self, items):
        done = commit(self, items)
        with lock:
            state["now"] -= len(items)
        return done

    monkeypatch.setattr(chunk_codec.ChunkCodec, "encode", counting_encode)
    monkeypatch.setattr(type(store), "commit_many", counting_commit)
    x = np.random.default_rng(0).random((512, 512))
    with cs.config.set({"threading.write_bytes": budget_chunks * nbytes}):
        a[...] = x
    # at most the budget, or one chunk per encoding thread (one per core at least)
    cores = max(2, os.cpu_count() or 1)
    assert 1 <= state["peak"] <= max(budget_chunks, cores)
    np.testing.assert_array_equal(a[...], x)


def test_a_large_write_holds_only_its_runs_in_flight(tmp_path):
    """64 MiB written as 64 uncompressed chunks of 1 MiB with an 8 MiB write budget: the
    write's own allocations (encoded chunks) stay near the budget, not the 64 MiB."""
    import tracemalloc
    x = np.random.default_rng(0).random((1024, 8192))  # 64 MiB, C-ordered blocks differ
    a = cs.create_array(str(tmp_path / "big.zarr"), shape=x.shape, chunks=(128, 1024),
                        dtype="f8", compressors=None)
    with cs.config.set({"threading.write_bytes": 8 * 2**20}):
        tracemalloc.start()
        try:
            a[...] = x
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    cores = max(2, os.cpu_count() or 1)
    assert peak <= max(8, cores) * 2**20 + 4 * 2**20, peak / 2**20
    np.testing.assert_array_equal(a[...], x)


def test_local_writes_run_on_two_threads_per_core_in_cache_sized_runs(tmp_path, monkeypatch):
    """A local write commits runs of at most ``WARM_RUN_BYTES`` of chunks (written while
    still in the cache), from at most two threads per core (more only take turns)."""
    from chunkstore.io import buffers
    from chunkstore.runtime import current
    from chunkstore.storage import LocalStore

    x = np.random.default_rng(2).random((512, 4096))  # 16 MiB: 32 chunks of 512 KiB
    a = cs.create_array(str(tmp_path / "w.zarr"), shape=x.shape, chunks=(64, 1024),
                        dtype="f8", compressors=None)
    seen, runs = set(), []
    commit = LocalStore.commit_many

    def recording(self, items):
        items = list(items)
        seen.add(threading.get_ident())
        runs.append(len(items))
        return commit(self, items)

    monkeypatch.setattr(LocalStore, "commit_many", recording)
    a[...] = x
    assert sum(runs) == 32
    assert max(runs) <= buffers.WARM_RUN_BYTES // (64 * 1024 * 8) == 4
    assert 1 <= len(seen) <= buffers.BLOCKING_THREADS_PER_CORE * current().pool.threads(True)
    np.testing.assert_array_equal(a[...], x)


def test_release_all_drops_every_threads_buffers():
    ready, done = threading.Event(), threading.Event()
    held = {}

    def worker():
        buf = scratch.scratch_buffer((32, 32), np.float64, "decode")
        held["before"] = scratch.held_bytes()
        ready.set()
        done.wait()
        held["after"] = scratch.held_bytes()
        held["same"] = scratch.scratch_buffer((32, 32), np.float64, "decode") is buf

    t = threading.Thread(target=worker)
    t.start()
    ready.wait()
    try:
        scratch.release_all()  # from another thread
    finally:
        done.set()
        t.join()
    assert held == {"before": 32 * 32 * 8, "after": 0, "same": False}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("chunks", [(8, 40), (8, 8)])  # whole rows (contiguous) / blocks
def test_raw_chunks_are_stored_once_and_never_alias_the_value(zarr_format, chunks):
    """Uncompressed chunks: a strided block becomes new bytes that the memory store keeps
    as they are (no second copy); a contiguous one is copied by the store, so changing
    the written array afterwards changes nothing stored."""
    x = np.arange(32 * 40, dtype="<i4").reshape(32, 40)
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=x.shape, chunks=chunks, dtype="<i4", compressors=None,
                        zarr_format=zarr_format)
    value = x.copy()
    a[...] = value
    value[...] = -1  # the caller reuses its buffer
    np.testing.assert_array_equal(a[...], x)
    j = 0 if chunks[1] == x.shape[1] else 1
    stored = store.get(a.chunk_key((1, j)))
    assert type(stored) is bytes
    assert stored == np.ascontiguousarray(x[chunks[0]:2 * chunks[0],
                                            j * chunks[1]:(j + 1) * chunks[1]]).tobytes()
