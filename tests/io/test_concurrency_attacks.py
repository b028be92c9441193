"""Red team: concurrent writers, readers, appenders in real processes and threads.

Every test asserts the exact final content. Writers never share a region unless the
test says so; "nothing lost" must hold at every granularity (elements of one chunk,
inner chunks of one shard), across processes and threads, on LocalStore and on S3
(moto server), without a synchronizer.
"""

from __future__ import annotations

import os
import threading

import dask
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage.resolve import resolve_store
from tests.multiproc import context, run_together, start_fork_server

N = 4  # writers
ROUNDS = 3



def _run(target, args_of, n=N, timeout=240):
    run_together(target, args_of, n, timeout)


def _open(where, options=None, **kw):
    return cs.open_array(where, mode="r+", storage_options=options, **kw)


# -- 1. strided (unaligned) writers across shards -------------------------------------------
STRIDED_SHAPE, STRIDED_CHUNKS, STRIDED_SHARDS = (2048,), (64,), (512,)


def _strided_writer(where, options, proc, start):
    a = _open(where, options)
    start.wait()
    for r in range(ROUNDS):
        a[proc::N] = 100 * r + proc + 1  # every chunk of every shard, partly


def _expected_strided(shape):
    idx = np.arange(shape[0])
    return (100 * (ROUNDS - 1) + idx % N + 1).astype("i4")


def test_mp_strided_writers_across_shards_local(tmp_path):
    where = str(tmp_path / "s.zarr")
    cs.create_array(where, shape=STRIDED_SHAPE, chunks=STRIDED_CHUNKS, shards=STRIDED_SHARDS,
                    dtype="i4", fill_value=-1)
    _run(_strided_writer, lambda i: (where, None, i))
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:],
                                  _expected_strided(STRIDED_SHAPE))


def test_mp_strided_writers_unsharded_local(tmp_path):
    where = str(tmp_path / "u.zarr")
    cs.create_array(where, shape=STRIDED_SHAPE, chunks=STRIDED_CHUNKS, dtype="i4",
                    fill_value=-1)
    _run(_strided_writer, lambda i: (where, None, i))
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:],
                                  _expected_strided(STRIDED_SHAPE))


def _s3_store(s3_bucket, name):
    """``(url, options naming the backend, store)`` of ``s3_bucket_both``: every
    process opens the same backend."""
    url, options = s3_bucket
    where = f"{url}/{name}"
    store = resolve_store(where, storage_options=options)
    if not store.capabilities.conditional_writes:
        pytest.skip(f"{store!r}.capabilities.conditional_writes is False: this S3 client "
                    "cannot send If-Match/If-None-Match, S3 writers need a synchronizer")
    return where, options, store


# a race proves a backend once: this one on obstore, the fsspec race is test_mp_aligned_inner_chunks_one_shard_s3
@pytest.mark.parametrize("s3_bucket_both", ["obstore"], indirect=True)
def test_mp_strided_writers_across_shards_s3(s3_bucket_both):
    where, options, store = _s3_store(s3_bucket_both, "s.zarr")
    shape = (512,)
    cs.create_array(store, shape=shape, chunks=(32,), shards=(128,), dtype="i4", fill_value=-1)
    _run(_strided_writer, lambda i: (where, options, i))
    got = cs.open_array(where, mode="r", storage_options=options)[:]
    np.testing.assert_array_equal(got, _expected_strided(shape))


def _aligned_inner_writer(where, options, proc, start):
    a = _open(where, options)
    start.wait()
    inner = a.chunks[0]
    n_inner = a.shape[0] // inner
    for r in range(ROUNDS):
        for i in range(proc, n_inner, N):
            a[i * inner:(i + 1) * inner] = 1000 * r + i


# a race proves a backend once: this one on fsspec, the obstore race is test_mp_strided_writers_across_shards_s3
@pytest.mark.parametrize("s3_bucket_both", ["fsspec"], indirect=True)
def test_mp_aligned_inner_chunks_one_shard_s3(s3_bucket_both):
    where, options, store = _s3_store(s3_bucket_both, "a.zarr")
    cs.create_array(store, shape=(512,), chunks=(32,), shards=(512,), dtype="i4")
    _run(_aligned_inner_writer, lambda i: (where, options, i))
    got = cs.open_array(where, mode="r", storage_options=options)[:]
    expected = np.repeat(1000 * (ROUNDS - 1) + np.arange(16), 32).astype("i4")
    np.testing.assert_array_equal(got, expected)


# -- 1b. strided writers racing appenders (the writers' edge chunk is shared) ----------------
BASE = 250  # not a multiple of the chunk: the last chunk is shared with appended rows
APPENDS, BLOCK = 8, 16


def _mixed_worker(where, options, proc, start):
    a = _open(where, options)
    start.wait()
    if proc < 2:
        for r in range(ROUNDS):
            a[proc:BASE:2] = 100 * r + proc + 1
    else:
        for k in range(APPENDS):
            a.append(np.full(BLOCK, 1000 * proc + k, dtype="i4"))


def _check_mixed(got):
    idx = np.arange(BASE)
    np.testing.assert_array_equal(got[:BASE], 100 * (ROUNDS - 1) + idx % 2 + 1)
    assert got.shape == (BASE + 2 * APPENDS * BLOCK,)
    blocks = got[BASE:].reshape(-1, BLOCK)
    assert (blocks == blocks[:, :1]).all(), "an appended block was torn or lost"
    assert sorted(blocks[:, 0].tolist()) == sorted(1000 * p + k for p in (2, 3)
                                                   for k in range(APPENDS))


def test_mp_strided_writers_and_appenders_local(tmp_path):
    where = str(tmp_path / "m.zarr")
    cs.create_array(where, shape=(BASE,), chunks=(32,), shards=(128,), dtype="i4",
                    fill_value=-1)
    _run(_mixed_worker, lambda i: (where, None, i))
    _check_mixed(cs.open_array(where, mode="r")[:])


# a race proves a backend once: this one on obstore, the fsspec race is test_mp_fill_toggling_on_s3
@pytest.mark.parametrize("s3_bucket_both", ["obstore"], indirect=True)
def test_mp_strided_writers_and_appenders_s3(s3_bucket_both):
    where, options, store = _s3_store(s3_bucket_both, "m.zarr")
    cs.create_array(store, shape=(BASE,), chunks=(32,), shards=(128,), dtype="i4",
                    fill_value=-1)
    _run(_mixed_worker, lambda i: (where, options, i))
    _check_mixed(cs.open_array(where, mode="r", storage_options=options)[:])


# -- 2. threads: one shared Array object vs one Array each --------------------------------------
def _threads(fn, n=N):
    errors = []
    barrier = threading.Barrier(n)

    def run(i):
        try:
            barrier.wait()
            fn(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors


@pytest.mark.parametrize("shared", [True, False], ids=["shared-array", "own-array"])
@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "plain"])
def test_threads_strided_writers(tmp_path, shared, sharded):
    where = str(tmp_path / "t.zarr")
    a = cs.create_array(where, shape=(1024,), chunks=(32,),
                        shards=(256,) if sharded else None, dtype="i4", fill_value=-1)

    def work(i):
        arr = a if shared else cs.open_array(where, mode="r+")
        for r in range(ROUNDS):
            arr[i::N] = 100 * r + i + 1

    _threads(work)
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:], _expected_strided((1024,)))


@pytest.mark.parametrize("shared", [True, False], ids=["shared-array", "own-array"])
def test_threads_appenders_and_attrs(tmp_path, shared):
    where = str(tmp_path / "ap.zarr")
    a = cs.create_array(where, shape=(0,), chunks=(8,), shards=(32,), dtype="i4")

    def work(i):
        arr = a if shared else cs.open_array(where, mode="r+")
        for k in range(10):
            arr.append(np.full(3, 100 * i + k, dtype="i4"))
            arr.attrs[f"t{i}-{k}"] = k

    _threads(work)
    b = cs.open_array(where, mode="r")
    assert b.shape == (N * 10 * 3,)
    blocks = b[:].reshape(-1, 3)
    assert (blocks == blocks[:, :1]).all()
    assert sorted(blocks[:, 0].tolist()) == sorted(100 * i + k for i in range(N)
                                                   for k in range(10))
    assert dict(b.attrs) == {f"t{i}-{k}": k for i in range(N) for k in range(10)}


# -- a reader beside ONE shard writer must never see another inner chunk's bytes -------------
def _toggler(where, running, stop):
    a = _open(where)
    while not stop.is_set():
        a[0:64] = 2  # inner chunk 0 stored: inner chunk 1 moves behind it in the shard
        a[0:64] = 0  # inner chunk 0 all fill: dropped, inner chunk 1 back at offset 0
        running.set()


def _wait_running(process, running) -> None:
    """Until ``process`` has written once (an event, whatever the machine's load)."""
    while not running.wait(0.1):
        assert process.is_alive(), f"the writer ended first (exit code {process.exitcode})"


READS_BESIDE_WRITER = 500


@pytest.mark.parametrize("compressors", [None, "auto"], ids=["raw", "compressed"])
def test_reader_beside_shard_writer_never_reads_wrong_inner_chunk(tmp_path, compressors):
    """Inner chunk 1 holds 1 throughout; only inner chunk 0 changes (2 <-> fill). A reader
    opening the array afresh must always read 1s for inner chunk 1.

    Observed (raw inner chunks): ~1-2% of reads return 2s (inner chunk 0's bytes): the shard index is read
    by one store call and the inner chunk's byte range by another; when a writer
    replaces the shard between the two, the old offsets are applied to the new shard.
    The recheck of ``ShardIO._read_batch`` only covers indexes that were cached."""
    where = str(tmp_path / "s.zarr")
    a = cs.create_array(where, shape=(128,), chunks=(64,), shards=(128,), dtype="i4",
                        compressors=compressors)
    a[64:128] = 1
    ctx = context()
    running, stop = ctx.Event(), ctx.Event()
    writer = ctx.Process(target=_toggler, args=(where, running, stop))
    writer.start()
    wrong, reads = [], 0
    try:
        _wait_running(writer, running)
        # a count of reads, not seconds of writing: 1-2% of them were wrong before the fix
        # (~5-10 of 500); with the index recheck disabled 6% (~30) are
        while writer.is_alive() and reads < READS_BESIDE_WRITER:  # it toggles until stopped
            reads += 1
            try:
                got = cs.open_array(where, mode="r")[64:128]
            except Exception as e:  # noqa: BLE001 - an undecodable read is a failure too
                wrong.append(f"{type(e).__name__}: {e}"[:200])
                continue
            if not (got == 1).all():
                wrong.append(np.unique(got).tolist())
    finally:
        stop.set()
        writer.join(60)
    assert writer.exitcode == 0
    assert reads == READS_BESIDE_WRITER
    assert not wrong, f"{len(wrong)} of {reads} reads of inner chunk 1 returned {wrong[:3]}"


# -- 10. feature crossings ----------------------------------------------------------------------
def test_threads_nan_fill_partial_writers(tmp_path):
    where = str(tmp_path / "nan.zarr")
    a = cs.create_array(where, shape=(40, 40), chunks=(16, 16), shards=(32, 32), dtype="f8",
                        fill_value=float("nan"))

    def work(i):
        arr = cs.open_array(where, mode="r+")
        for r in range(ROUNDS):
            arr[i::N, ::2] = 10.0 * r + i

    _threads(work)
    got = cs.open_array(where, mode="r")[:]
    expected = np.full((40, 40), np.nan)
    for i in range(N):
        expected[i::N, ::2] = 10.0 * (ROUNDS - 1) + i
    np.testing.assert_array_equal(got, expected)
    assert a.fill_value != a.fill_value


def test_threads_write_empty_chunks_and_clearing(tmp_path):
    """Half the writers set their elements to fill (chunks may become empty and be
    deleted), the others to values: the deletes must not drop the others' values."""
    where = str(tmp_path / "e.zarr")
    a = cs.create_array(where, shape=(512,), chunks=(16,), shards=(128,), dtype="i4",
                        fill_value=0)
    a[:] = 7

    def work(i):
        arr = cs.open_array(where, mode="r+")
        for r in range(ROUNDS):
            arr[i::N] = 0 if i % 2 else r + 1

    _threads(work)
    expected = np.where(np.arange(512) % 2, 0, ROUNDS).astype("i4")
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:], expected)


def test_threads_sharding_synchronizer_append(tmp_path):
    where = str(tmp_path / "sy.zarr")
    sync = cs.ThreadSynchronizer()
    a = cs.create_array(where, shape=(10,), chunks=(4,), shards=(8,), dtype="i4",
                        synchronizer=sync)
    a[:] = -1

    def work(i):
        arr = cs.open_array(where, mode="r+", synchronizer=sync)
        for k in range(8):
            if i == 0:
                arr[0:10] = k  # overlaps nobody else: rows 0..10 are its own
            else:
                arr.append(np.full(5, 100 * i + k, dtype="i4"))

    _threads(work)
    got = cs.open_array(where, mode="r")[:]
    np.testing.assert_array_equal(got[:10], np.full(10, 7))
    blocks = got[10:].reshape(-1, 5)
    assert (blocks == blocks[:, :1]).all()
    assert sorted(blocks[:, 0].tolist()) == sorted(100 * i + k for i in range(1, N)
                                                   for k in range(8))


def test_zero_d_array_concurrent_writes_and_attrs(tmp_path):
    where = str(tmp_path / "z.zarr")
    cs.create_array(where, shape=(), dtype="i4", fill_value=0)

    def work(i):
        arr = cs.open_array(where, mode="r+")
        arr[...] = i + 1
        arr.attrs[f"k{i}"] = i

    _threads(work)
    b = cs.open_array(where, mode="r")
    assert int(b[...]) in {1, 2, 3, 4}
    assert dict(b.attrs) == {f"k{i}": i for i in range(N)}


def test_zero_length_axis_appenders(tmp_path):
    where = str(tmp_path / "zl.zarr")
    cs.create_array(where, shape=(0, 3), chunks=(4, 3), shards=(8, 3), dtype="i4")

    def work(i):
        arr = cs.open_array(where, mode="r+")
        for k in range(5):
            arr.append(np.full((2, 3), 10 * i + k, dtype="i4"))
        arr.append(np.zeros((0, 3), dtype="i4"))  # a 0-row append changes nothing

    _threads(work)
    got = cs.open_array(where, mode="r")[:]
    assert got.shape == (N * 5 * 2, 3)
    rows = got.reshape(-1, 6)
    assert (rows == rows[:, :1]).all()
    assert sorted(rows[:, 0].tolist()) == sorted(10 * i + k for i in range(N) for k in range(5))


def test_rechunk_into_shards_on_process_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    data = np.arange(128 * 128, dtype="i4").reshape(128, 128)
    src = cs.array(data, store=str(tmp_path / "r.zarr"), path="src", chunks=(128, 4))
    # worker processes forked from the suite's fork server (chunkstore imported), not
    # spawned: each spawned worker spent seconds importing before its first task
    start_fork_server()
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        out = cs.dask.rechunk(src, (4, 128), str(tmp_path / "r.zarr"), path="dst",
                              max_mem="40KB", shards=(64, 128)).execute()
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "r.zarr"), path="dst")[:], data)
    assert out.shards == (64, 128)
    assert not [n for n in os.listdir(tmp_path) if "rechunk-tmp" in n]


@pytest.mark.parametrize("write_empty_chunks", [True, False])
def test_mp_write_empty_chunks_strided_to_fill_and_back(tmp_path, write_empty_chunks):
    """Writers alternately clear their elements to fill and set them, so chunks/shards
    keep becoming empty (deleted, or stored as fill) and non-empty again."""
    where = str(tmp_path / f"we{write_empty_chunks}.zarr")
    cs.create_array(where, shape=(256,), chunks=(16,), shards=(64,), dtype="i4",
                    fill_value=0)
    _run(_empty_toggler, lambda i: (where, write_empty_chunks, i))
    expected = (np.arange(256) % N + 1).astype("i4")
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:], expected)


def _empty_toggler(where, write_empty_chunks, proc, start):
    a = cs.open_array(where, mode="r+", write_empty_chunks=write_empty_chunks)
    start.wait()
    for _ in range(ROUNDS):
        a[proc::N] = 0
        a[proc::N] = proc + 1


def _overlapping_synchronized(where, lock_dir, proc, start):
    a = cs.open_array(where, mode="r+", synchronizer=cs.ProcessSynchronizer(lock_dir))
    start.wait()
    for k in range(8):
        if proc == 0:
            a[1:3] = k
        elif proc == 1:
            a[2:4] = 100 + k
        else:
            a.append(np.full(4, 1000 * proc + k, dtype="i4"))


def test_mp_process_synchronizer_overlapping_writers_and_appenders(tmp_path):
    where = str(tmp_path / "ps.zarr")
    cs.create_array(where, shape=(10,), chunks=(4,), shards=(8,), dtype="i4", fill_value=-1)
    _run(_overlapping_synchronized, lambda i: (where, str(tmp_path / "locks"), i))
    got = cs.open_array(where, mode="r")[:]
    assert got[1] == 7 and got[3] == 107 and got[2] in (7, 107), got[:4]
    assert got[0] == -1 and (got[4:10] == -1).all()
    blocks = got[10:].reshape(-1, 4)
    assert (blocks == blocks[:, :1]).all()
    assert sorted(blocks[:, 0].tolist()) == sorted(1000 * p + k for p in (2, 3)
                                                   for k in range(8))


def test_reader_beside_appenders_sees_whole_blocks(tmp_path):
    where = str(tmp_path / "ra.zarr")
    cs.create_array(where, shape=(0,), chunks=(8,), shards=(32,), dtype="i4", fill_value=0)
    stop = threading.Event()
    bad = []

    def reader():
        while not stop.is_set():
            got = cs.open_array(where, mode="r")[:]
            blocks = got.reshape(-1, 4)
            if not (blocks == blocks[:, :1]).all():
                bad.append(got.tolist())

    t = threading.Thread(target=reader)
    t.start()
    try:
        def work(i):
            arr = cs.open_array(where, mode="r+")
            for k in range(10):
                arr.append(np.full(4, 100 * i + k + 1, dtype="i4"))
        _threads(work, n=3)
    finally:
        stop.set()
        t.join(60)
    assert not bad, bad[:2]
    got = cs.open_array(where, mode="r")[:].reshape(-1, 4)[:, 0]
    assert sorted(got.tolist()) == sorted(100 * i + k + 1 for i in range(3) for k in range(10))


@pytest.mark.parametrize("shared", [True, False], ids=["shared-array", "own-array"])
def test_threads_strided_writers_and_appenders(tmp_path, shared):
    where = str(tmp_path / "tm.zarr")
    a = cs.create_array(where, shape=(BASE,), chunks=(32,), shards=(128,), dtype="i4",
                        fill_value=-1)

    def work(i):
        arr = a if shared else cs.open_array(where, mode="r+")
        if i < 2:
            for r in range(ROUNDS):
                arr[i:BASE:2] = 100 * r + i + 1
        else:
            for k in range(APPENDS):
                arr.append(np.full(BLOCK, 1000 * i + k, dtype="i4"))

    _threads(work)
    _check_mixed(cs.open_array(where, mode="r")[:])


# a race proves a backend once: this one on fsspec, the obstore race is test_mp_strided_writers_and_appenders_s3
@pytest.mark.parametrize("s3_bucket_both", ["fsspec"], indirect=True)
def test_mp_fill_toggling_on_s3(s3_bucket_both):
    """Shards become empty (conditional DELETE with If-Match) and come back."""
    where, options, store = _s3_store(s3_bucket_both, "we.zarr")
    cs.create_array(store, shape=(128,), chunks=(16,), shards=(64,), dtype="i4", fill_value=0)
    _run(_empty_toggler_s3, lambda i: (where, options, i))
    expected = (np.arange(128) % N + 1).astype("i4")
    np.testing.assert_array_equal(cs.open_array(where, mode="r", storage_options=options)[:],
                                  expected)


def _empty_toggler_s3(where, options, proc, start):
    a = _open(where, options)
    start.wait()
    for _ in range(2):
        a[proc::N] = 0
        a[proc::N] = proc + 1


# -- a zip archive written by two processes, each with the ProcessSynchronizer -----------------
def _zip_writer(path, lock_dir, proc, start):
    a = cs.open_array(path, mode="a", synchronizer=cs.ProcessSynchronizer(lock_dir))
    start.wait()
    for i in range(proc, 16, 2):
        a[i * 4:(i + 1) * 4] = i + 1  # its own whole chunks
    a.store.close()


def test_mp_zip_writers_with_synchronizer_lose_nothing_or_fail(tmp_path):
    """ZipStore says "two processes must not add to one archive at once"; issue 10 asks
    for a clear error or warning when such concurrent use happens. With a
    ProcessSynchronizer (what the docs tell writers of non-CAS stores to use) each
    process writes only its own chunks.

    Observed: exit 0, no warning, and every chunk of one process is gone (the archive is
    committed whole by ``os.replace``: the last process to close wins)."""
    path = str(tmp_path / "x.zip")
    a = cs.create_array(path, shape=(64,), chunks=(4,), dtype="i4")
    a.store.close()
    ctx = context()
    start = ctx.Event()
    procs = [ctx.Process(target=_zip_writer, args=(path, str(tmp_path / "locks"), p, start))
             for p in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    if any(p.exitcode != 0 for p in procs):
        return  # a clear failure of a writer is acceptable
    got = cs.open_array(path, mode="r")[:].reshape(16, 4)[:, 0]
    np.testing.assert_array_equal(got, np.arange(1, 17))


# -- ranged reads inside one uncompressed chunk, beside a writer of that chunk -----------------
def test_ranged_read_of_one_chunk_is_never_torn_memory_store():
    """An uncompressed chunk of a store without zero-copy views is read as byte ranges
    (``io/ranges.py``), one ``get`` per range on a MemoryStore. A writer replaces the whole
    chunk (all 1s <-> all 2s); a reader of one column must see one version.

    Observed: ~0.3% of reads mix both versions inside one chunk (each range is a
    separate lookup of the key; nothing ties the ranges to one version)."""
    a = cs.create_array(cs.MemoryStore(), shape=(64, 2048), chunks=(64, 2048), dtype="i4",
                        compressors=None)
    a[:] = 1
    stop = threading.Event()

    def writer():
        k = 0
        while not stop.is_set():
            a[:] = k % 2 + 1
            k += 1

    t = threading.Thread(target=writer)
    t.start()
    torn, reads = 0, 10_000  # a count, not 6 s: ~30 torn reads expected of the bug
    try:
        for _ in range(reads):
            col = a[:, 0]
            torn += bool((col != col[0]).any())
    finally:
        stop.set()
        t.join(30)
    assert torn == 0, f"{torn} of {reads} reads of one chunk mixed two versions"


def _chunk_flipper(where, options, running, stop):
    a = _open(where, options)
    k = 0
    while not stop.is_set():
        a[:] = k % 2 + 1
        k += 1
        running.set()


def test_ranged_read_of_one_chunk_is_never_torn_s3(s3_bucket_both):
    """The same on S3: the ranges of one chunk are separate GETs (``cat_ranges``)."""
    where, options, store = _s3_store(s3_bucket_both, "rr.zarr")
    a = cs.create_array(store, shape=(32, 2048), chunks=(32, 2048), dtype="i4",
                        compressors=None)
    a[:] = 1
    ctx = context()
    running, stop = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_chunk_flipper, args=(where, options, running, stop))
    p.start()
    torn, reads = [], 0
    try:
        _wait_running(p, running)
        reader = cs.open_array(where, mode="r", storage_options=options)
        while p.is_alive() and reads < 200:  # the writer flips until we stop it
            col = reader[:, 0]
            reads += 1
            if (col != col[0]).any():
                torn.append(col.tolist())
    finally:
        stop.set()
        p.join(60)
    assert p.exitcode == 0 and reads == 200
    assert not torn, f"{len(torn)} of {reads} reads of one chunk mixed two versions"
