"""Rechunk/transpose into targets that cannot hold concurrent partial writes, or have no
room for intermediate data: the result is exact element for element, and a refused plan
leaves an existing target exactly as it was (nothing is created or deleted first)."""

from __future__ import annotations

import uuid

import dask
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.rechunk.planner import PlanError

# zipfile warns "Duplicate name" each time an entry of a zip archive is rewritten
pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")

DATA = (np.arange(600 * 40).reshape(600, 40) % 977).astype("i4") + 1


@pytest.fixture
def src(tmp_path):
    a = cs.create_array(str(tmp_path / "src.zarr"), shape=DATA.shape, chunks=(4, 40), dtype="i4")
    a[...] = DATA
    return a


def _where(tmp_path, kind, name):
    if kind == "zip":
        return str(tmp_path / f"{name}.zip")
    if kind == "fsspec_memory":
        return f"memory://unsafe-{uuid.uuid4().hex[:10]}/{name}.zarr"
    return str(tmp_path / f"{name}.zarr")


def _read(where, path, kind, out):
    if kind == "zip":
        out.store.close()
    return cs.open_array(where, path=path, mode="r")[...]


# -- Bug C: shards assembled by partial writes on stores without compare-and-swap ---------
@pytest.mark.parametrize("kind", ["zip", "fsspec_memory", "directory"])
@pytest.mark.parametrize("target, shards, max_mem", [
    ((600, 2), (600, 8), "16KiB"),  # the red team's case: two stages, 4 chunks per shard
    ((100, 4), (200, 8), "8KiB"),  # shards of 2 x 2 chunks
    ((600, 1), (600, 40), "24KiB"),  # 40 chunks per shard, one shard row
])
def test_rechunk_into_shards_exact(tmp_path, src, kind, target, shards, max_mem):
    with dask.config.set(scheduler="threads", num_workers=8):
        for trial in range(4):  # a lost update is a race: several runs
            where = _where(tmp_path, kind, f"d{trial}")
            plan = csd.rechunk(src, target, where, "a/b", max_mem=max_mem, shards=shards)
            # the plan does assemble shards from several tasks (else the case is moot)
            assert plan.stages[-1].block != plan.target.layout.write_shape
            assert plan.shared_units is (kind != "directory")
            if kind != "directory":
                assert isinstance(plan.target.synchronizer, cs.ThreadSynchronizer)
                assert any("lock per shard" in n for n in plan.describe()["notes"])
            out = plan.execute()
            got = _read(where, "a/b", kind, out)
            assert got.dtype == DATA.dtype and got.shape == DATA.shape
            assert int((got != DATA).sum()) == 0, f"trial {trial}"
            meta = cs.open_array(where, path="a/b", mode="r")
            assert meta.chunks == target and tuple(meta.layout.write_shape) == shards


@pytest.mark.parametrize("kind", ["zip", "fsspec_memory"])
def test_transpose_into_shards_exact(tmp_path, src, kind):
    with dask.config.set(scheduler="threads", num_workers=8):
        for trial in range(3):
            where = _where(tmp_path, kind, f"t{trial}")
            out = csd.transpose(src, (1, 0), where, "t", chunks=(2, 600), max_mem="16KiB",
                                shards=(8, 600))
            np.testing.assert_array_equal(_read(where, "t", kind, out), DATA.T)


@pytest.mark.parametrize("scheduler", ["processes", "sync"])
def test_shared_shards_run_on_this_process(tmp_path, src, scheduler):
    """Thread locks serve one process: a process-pool scheduler is not used for them (each
    task would get a lock of its own), and the result is exact."""
    where = _where(tmp_path, "zip", "p")
    with dask.config.set(scheduler=scheduler):
        out = csd.rechunk(src, (600, 2), where, "a", max_mem="16KiB",
                          shards=(600, 8)).execute()
    np.testing.assert_array_equal(_read(where, "a", "zip", out), DATA)


def test_no_lock_when_whole_shards_fit(tmp_path, src):
    """A max_mem that holds whole shards needs no lock: each task writes its own shards."""
    where = _where(tmp_path, "zip", "w")
    plan = csd.rechunk(src, (600, 2), where, "a", max_mem="64MiB", shards=(600, 8))
    assert not plan.shared_units and plan.target.synchronizer is None
    np.testing.assert_array_equal(_read(where, "a", "zip", plan.execute()), DATA)


def test_refused_on_a_cluster_before_anything_is_touched(tmp_path, src):
    distributed = pytest.importorskip("distributed")
    where = _where(tmp_path, "zip", "c")
    old = cs.create_array(where, name="a", shape=(5,), dtype="i4", chunks=(2,))
    old[:] = [1, 2, 3, 4, 5]
    old.store.close()
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None):
        with pytest.raises(PlanError, match=r"(?s)c\.zip.*conditional writes.*max_mem"):
            csd.rechunk(src, (600, 2), where, "a", max_mem="16KiB", shards=(600, 8),
                        overwrite=True)
        # a plan made before the client existed is refused at execute, too
    with dask.config.set(scheduler="threads"):
        plan = csd.rechunk(src, (600, 2), _where(tmp_path, "zip", "late"), "a",
                           max_mem="16KiB", shards=(600, 8))
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None):
        with pytest.raises(PlanError, match="conditional writes"):
            plan.execute()
    plan.target.store.close()
    kept = cs.open_array(where, path="a", mode="r")
    assert kept.shape == (5,) and kept.chunks == (2,)
    np.testing.assert_array_equal(kept[...], [1, 2, 3, 4, 5])


# -- Bug F: refusals before the (overwritten) target is created ---------------------------
def _old_array(tmp_path, kind):
    st = {"memory": cs.MemoryStore, "zip": lambda: str(tmp_path / "r.zip"),
          "directory": lambda: str(tmp_path / "r.zarr")}[kind]()
    old = cs.create_array(st, shape=(5,), dtype="i4", chunks=(2,), attributes={"v": 1})
    old[:] = [1, 2, 3, 4, 5]
    if kind == "zip":
        old.store.close()
    return st


def _assert_old_intact(st):
    a = cs.open_array(st, mode="r")
    assert a.shape == (5,) and a.dtype == np.dtype("i4") and a.chunks == (2,)
    assert dict(a.attrs) == {"v": 1}
    np.testing.assert_array_equal(a[...], [1, 2, 3, 4, 5])


def test_overwrite_zip_root_keeps_intermediates_inside_the_archive(tmp_path, src):
    """The root array of a zip archive keeps its intermediate data in its own
    ``__chunkstore_tmp__`` directory, removed at the end: the archive then holds the new
    array's keys and nothing else (rechunk and transpose)."""
    st = _old_array(tmp_path, "zip")
    plan = csd.rechunk(src, (600, 2), st, max_mem="16KiB", overwrite=True)
    assert len(plan.stages) == 2
    plan.execute().store.close()
    got = cs.open_array(st, mode="r")
    assert got.chunks == (600, 2)
    np.testing.assert_array_equal(got[...], DATA)
    assert all(k == "zarr.json" or k.startswith("c/") for k in got.store.list())
    got.store.close()
    out = csd.transpose(src, (1, 0), st, chunks=(2, 600), max_mem="16KiB", overwrite=True)
    out.store.close()
    got = cs.open_array(st, mode="r")
    np.testing.assert_array_equal(got[...], DATA.T)
    assert all(k == "zarr.json" or k.startswith("c/") for k in got.store.list())
    got.store.close()


def test_overwrite_memory_root_leaves_nothing_beside_it(tmp_path, src):
    """The root array of a MemoryStore keeps its intermediate in its own scratch
    directory, removed at the end."""
    st = _old_array(tmp_path, "memory")
    plan = csd.rechunk(src, (600, 2), st, max_mem="16KiB", overwrite=True)
    assert len(plan.stages) == 2 and not plan.stages[0].raw_target
    np.testing.assert_array_equal(plan.execute()[...], DATA)
    assert all(k == "zarr.json" or k.startswith("c/") for k in st.list())  # nothing else
    np.testing.assert_array_equal(cs.open_array(st, mode="r")[...], DATA)
    out = csd.transpose(src, (1, 0), st, chunks=(2, 600), max_mem="16KiB", overwrite=True)
    np.testing.assert_array_equal(out[...], DATA.T)


@pytest.mark.parametrize("kind", ["memory", "zip"])
def test_overwrite_root_bad_temp_store_refused_intact(tmp_path, src, kind):
    st = _old_array(tmp_path, kind)
    with pytest.raises(ValueError, match="memory size"):
        csd.rechunk(src, (600, 2), st, max_mem="16KiB", overwrite=True, temp_store="64MB")
    _assert_old_intact(st)


@pytest.mark.parametrize("kind", ["memory", "zip", "directory"])
def test_overwrite_root_with_room_is_exact(tmp_path, src, kind):
    """With a temp store (memory, zip) or in the directory itself, the overwrite works."""
    st = _old_array(tmp_path, kind)
    temp = None if kind == "directory" else str(tmp_path / "scratch")
    plan = csd.rechunk(src, (600, 2), st, max_mem="16KiB", overwrite=True, temp_store=temp)
    assert len(plan.stages) == 2
    out = plan.execute()
    if kind == "zip":
        out.store.close()
    got = cs.open_array(st, mode="r")
    assert got.chunks == (600, 2)
    np.testing.assert_array_equal(got[...], DATA)
    assert not list(tmp_path.glob("r.zarr.*"))  # the neighbouring intermediate is gone


@pytest.mark.parametrize("kind", ["memory", "zip"])
def test_single_stage_overwrite_root_needs_no_room(tmp_path, src, kind):
    st = _old_array(tmp_path, kind)
    out = csd.rechunk(src, (8, 40), st, max_mem="1MiB", overwrite=True).execute()
    if kind == "zip":
        out.store.close()
    np.testing.assert_array_equal(cs.open_array(st, mode="r")[...], DATA)
