"""Nothing lost, by construction: concurrent writers in real processes, each scenario
ending in an exact check of the final content.

Writers of distinct regions (inner chunks of one shard, halves of one chunk, appended
rows, attributes of one document) never lose an update without a synchronizer, because
every read-modify-write commits only if its object is unchanged. A store without
compare-and-swap does lose them (proving the tests can fail), unless a synchronizer is
set.
"""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import SameLocationError
from chunkstore.storage import LocalStore
from chunkstore.storage.resolve import resolve_store
from tests.multiproc import NoCasLocalStore, run_together

N_PROCS = 4
SHARD_SHAPE, INNER = (65536,), (1024,)
#: on S3: 16 inner chunks of 256 elements (each write is a GET and a conditional PUT of the
#: whole shard to the one moto server: 64 KiB shards of 64 inner chunks cost ~4x as much)
S3_SHARD_SHAPE, S3_INNER = (4096,), (256,)


def _run(target, args_of, n=N_PROCS, timeout=240):
    run_together(target, args_of, n, timeout)


def _open(kind: str, where: str, options: dict | None, **kw):
    if kind == "nocas":
        return cs.open_array(NoCasLocalStore(where), mode="r+", **kw)
    return cs.open_array(where, mode="r+", storage_options=options, **kw)


# -- inner chunks of one shard, aligned, no synchronizer ----------------------------------
ROUNDS = 4


def _shard_writer(kind, where, options, proc, start):
    a = _open(kind, where, options)
    start.wait()
    inner = a.chunks[0]
    n_inner = a.shape[0] // inner
    for r in range(ROUNDS):
        for i in range(proc, n_inner, N_PROCS):  # this process's own inner chunks
            a[i * inner:(i + 1) * inner] = i * 1000 + r


def _expected_shard(shape=SHARD_SHAPE, inner=INNER) -> np.ndarray:
    n_inner = shape[0] // inner[0]
    return np.repeat(np.arange(n_inner) * 1000 + ROUNDS - 1, inner[0]).astype("i4")


def test_aligned_writers_of_one_shard_lose_nothing(tmp_path):
    where = str(tmp_path / "shard.zarr")
    cs.create_array(where, shape=SHARD_SHAPE, chunks=INNER, shards=SHARD_SHAPE, dtype="i4")
    _run(_shard_writer, lambda i: ("local", where, None, i))
    np.testing.assert_array_equal(cs.open_array(where, mode="r")[:], _expected_shard())


# a race proves a backend once: this one on obstore (fsspec: tests/io/test_concurrency_attacks.py
# test_mp_aligned_inner_chunks_one_shard_s3)
@pytest.mark.parametrize("s3_bucket_both", ["obstore"], indirect=True)
def test_aligned_writers_of_one_shard_on_s3_lose_nothing(s3_bucket_both):
    url, options = s3_bucket_both  # options name the backend, each process opens it
    where = f"{url}/shard.zarr"
    store = resolve_store(where, storage_options=options)
    if not store.capabilities.conditional_writes:
        pytest.skip("this S3 client/server pair offers no conditional PUT")
    cs.create_array(store, shape=S3_SHARD_SHAPE, chunks=S3_INNER, shards=S3_SHARD_SHAPE,
                    dtype="i4")
    _run(_shard_writer, lambda i: ("s3", where, options, i))
    got = cs.open_array(where, mode="r", storage_options=options)[:]
    np.testing.assert_array_equal(got, _expected_shard(S3_SHARD_SHAPE, S3_INNER))


def test_without_compare_and_swap_shard_writers_lose_updates(tmp_path):
    lost = False
    for attempt in range(5):  # a race: on a loaded machine one run may happen not to lose
        where = str(tmp_path / f"shard{attempt}.zarr")
        cs.create_array(where, shape=SHARD_SHAPE, chunks=INNER, shards=SHARD_SHAPE,
                        dtype="i4")
        _run(_shard_writer, lambda i, w=where: ("nocas", w, None, i))
        got = cs.open_array(where, mode="r")[:]
        if (got != _expected_shard()).any():
            lost = True
            break
    assert lost, "the control group (no compare-and-swap) should lose updates"


# -- a whole-chunk write racing a partial one, with a ProcessSynchronizer -------------------
def _whole_or_partial(kind, where, lock_dir, proc, start):
    a = _open(kind, where, None, synchronizer=cs.ProcessSynchronizer(lock_dir))
    start.wait()
    if proc == 0:
        a[:] = 1
    else:
        a[0:10] = 2


@pytest.mark.parametrize("kind", ["local", "nocas"])
def test_whole_chunk_write_racing_partial_one_with_synchronizer(tmp_path, kind):
    for trial in range(6):
        where = str(tmp_path / f"t{trial}.zarr")
        cs.create_array(where, shape=(100,), chunks=(100,), dtype="i4", fill_value=0)
        _run(_whole_or_partial, lambda i, w=where: (kind, w, str(tmp_path / "locks"), i), n=2)
        got = cs.open_array(where, mode="r")[:]
        partial_last = np.r_[np.full(10, 2), np.full(90, 1)]
        assert (got == 1).all() or (got == partial_last).all(), got


# -- appends and attributes ----------------------------------------------------------------
APPENDS = 40


def _appender(where, lock_dir, proc, start):
    sync = cs.ProcessSynchronizer(lock_dir) if lock_dir else None
    a = cs.open_array(where, mode="r+", synchronizer=sync)
    start.wait()
    for i in range(APPENDS):
        a.append(np.array([proc * 1000 + i], dtype="i4"))
        a.attrs[f"p{proc}-{i}"] = i


@pytest.mark.parametrize("synchronized", [False, True])
def test_concurrent_appends_and_attributes_keep_everything(tmp_path, synchronized):
    where = str(tmp_path / "log.zarr")
    cs.create_array(where, shape=(0,), chunks=(16,), dtype="i4")
    lock_dir = str(tmp_path / "locks") if synchronized else ""
    _run(_appender, lambda i: (where, lock_dir, i))
    a = cs.open_array(where, mode="r")
    expected = sorted(p * 1000 + i for p in range(N_PROCS) for i in range(APPENDS))
    assert a.shape == (N_PROCS * APPENDS,)
    assert sorted(a[:].tolist()) == expected
    for p in range(N_PROCS):  # each appender's rows in its own order
        mine = [v for v in a[:].tolist() if v // 1000 == p]
        assert mine == sorted(mine)
    assert dict(a.attrs) == {f"p{p}-{i}": i for p in range(N_PROCS) for i in range(APPENDS)}


# -- rechunk into shards -------------------------------------------------------------------
def _rechunk_into_shards(store) -> None:
    data = np.random.default_rng(0).random((512, 512))
    src = cs.array(data, store=store, path="src", chunks=(512, 8))
    plan = cs.dask.rechunk(src, (8, 512), store, path="dst", max_mem="200KB",
                           shards=(512, 512))
    out = plan.execute()
    assert out.shards == (512, 512) and out.chunks == (8, 512)
    np.testing.assert_array_equal(out[:], data)


def test_rechunk_into_shards_threads(tmp_path):
    _rechunk_into_shards(str(tmp_path / "r.zarr"))


def test_rechunk_into_shards_plans_whole_shards_when_they_fit(tmp_path):
    data = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    src = cs.array(data, store=str(tmp_path / "r.zarr"), path="src", chunks=(256, 8))
    plan = cs.dask.rechunk(src, (8, 256), str(tmp_path / "r.zarr"), path="dst",
                           max_mem="4MB", shards=(128, 256))
    assert all(b[0] % 128 == 0 or b[0] == 256 for b in (s.block for s in plan.stages[-1:]))
    np.testing.assert_array_equal(plan.execute()[:], data)


def test_rechunk_into_shards_distributed(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        _rechunk_into_shards(str(tmp_path / "r.zarr"))


# -- rewriting onto itself -----------------------------------------------------------------
def test_rechunk_transpose_to_store_refuse_their_own_source(tmp_path):
    where = str(tmp_path / "x.zarr")
    data = np.arange(64.0).reshape(8, 8)
    a = cs.array(data, store=where, path="a", chunks=(8, 1))
    for call in (
        lambda: cs.dask.rechunk(a, (1, 8), a.store, path=a.path, overwrite=True),
        lambda: cs.dask.transpose(a, (1, 0), a.store, path=a.path, overwrite=True),
        lambda: cs.dask.transpose(a, (1, 0), where, path="", overwrite=True),  # the parent
        lambda: cs.dask.to_store(cs.dask.from_store(a) * 2, where, path="a", overwrite=True),
    ):
        with pytest.raises(SameLocationError, match="source"):
            call()
        np.testing.assert_array_equal(cs.open_array(where, path="a", mode="r")[:], data)
    with pytest.raises(SameLocationError, match="source"):
        cs.copy(a, where, path="a", overwrite=True)
    np.testing.assert_array_equal(cs.open_array(where, path="a", mode="r")[:], data)
    # the same directory reached through another spelling is the same place
    other = LocalStore(str(tmp_path / "." / "x.zarr"))
    with pytest.raises(SameLocationError):
        cs.dask.rechunk(a, (1, 8), other, path="a", overwrite=True)
    # a sibling path is fine
    assert cs.dask.rechunk(a, (1, 8), where, path="b").execute()[:].tolist() == data.tolist()
