"""from_store / to_store / rechunk / transpose against NumPy, threaded scheduler."""

import os

import dask
import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd


@pytest.fixture(autouse=True)
def threaded():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture
def data():
    return np.random.default_rng(0).standard_normal((37, 53, 11))


def test_from_store_blocks_are_stored_chunks(tmp_path, data):
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(5, 7, 3))
    x = csd.from_store(a)
    assert x.chunksize == (5, 7, 3)
    np.testing.assert_array_equal(x.compute(), data)
    # deterministic names, and the handle is shipped once, not per task
    assert csd.from_store(str(tmp_path / "a.zarr")).name == x.name
    graph = dict(x.__dask_graph__())
    handles = [v for v in graph.values() if isinstance(v, cs.Array)]
    assert len(handles) == 1


def test_from_store_multiple_chunks(tmp_path, data):
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(5, 7, 3))
    x = csd.from_store(a, chunks=(10, 14, 11))
    np.testing.assert_array_equal(x[3:30, ::2].compute(), data[3:30, ::2])


@pytest.mark.parametrize("dask_chunks", [(5, 7, 3), (10, 14, 6), (4, 9, 5), (37, 1, 11)])
def test_to_store_aligned_and_unaligned(tmp_path, data, dask_chunks):
    x = da.from_array(data, chunks=dask_chunks)
    out = csd.to_store(x, str(tmp_path / "o.zarr"), chunks=(5, 7, 3))
    assert out.chunks == (5, 7, 3)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "o.zarr"))[:], data)


def test_to_store_unaligned_never_loses_updates(tmp_path):
    # many small unaligned blocks over few chunks: a racing read-modify-write would lose data
    data = np.arange(4000, dtype="i8")
    x = da.from_array(data, chunks=7)
    with dask.config.set(num_workers=8):
        out = csd.to_store(x, str(tmp_path / "o.zarr"), chunks=(100,))
    np.testing.assert_array_equal(out[:], data)


def test_to_store_region_and_compute_false(tmp_path, data):
    target = cs.create_array(str(tmp_path / "r.zarr"), shape=(50, 60, 20), chunks=(5, 7, 3),
                             dtype="f8", fill_value=-1)
    region = (slice(3, 40), slice(2, 55), slice(4, 15))
    delayed = csd.to_store(da.from_array(data, chunks=(6, 6, 6)), str(tmp_path / "r.zarr"),
                           region=region, compute=False)
    assert (target[:] == -1).all()  # nothing happened yet
    assert delayed.compute() is None  # store tasks return nothing
    np.testing.assert_array_equal(target[region], data)
    outside = target[:].copy()
    outside[region] = -1
    assert (outside == -1).all()


def test_to_store_region_shape_mismatch(tmp_path, data):
    cs.create_array(str(tmp_path / "r.zarr"), shape=(50, 60, 20), chunks=(5, 7, 3))
    with pytest.raises(ValueError, match="region"):
        csd.to_store(da.from_array(data), str(tmp_path / "r.zarr"), region=(slice(0, 5),) * 3)


def test_dask_native_from_array_and_store(data):
    a = cs.array(data, chunks=(5, 7, 3))
    np.testing.assert_array_equal(da.from_array(a, chunks=a.chunks).compute(), data)
    z = cs.zeros(data.shape, chunks=(5, 7, 3))
    da.store(da.from_array(data, chunks=(6, 6, 6)), z)
    np.testing.assert_array_equal(z[:], data)


@pytest.mark.parametrize(("target", "max_mem"), [((37, 1, 11), 60_000), ((1, 53, 1), 60_000),
                                                 ((13, 17, 4), 60_000), ((37, 53, 11), 800_000)])
def test_rechunk_matches_numpy(tmp_path, data, target, max_mem):
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(5, 7, 3))
    plan = csd.rechunk(a, target, str(tmp_path / "b.zarr"), max_mem=max_mem)
    desc = plan.describe()
    assert desc["peak_task_memory"] <= max_mem
    assert desc["bytes_read"] == data.nbytes * len(desc["stages"])
    out = plan.execute()
    assert out.chunks == target
    np.testing.assert_array_equal(out[:], data)
    # intermediate arrays are removed
    assert sorted(os.listdir(tmp_path / "b.zarr")) == ["c", "zarr.json"]


def test_rechunk_1d_and_4d(tmp_path):
    one = np.arange(1000.0)
    a = cs.array(one, store=str(tmp_path / "one.zarr"), chunks=(7,))
    np.testing.assert_array_equal(
        csd.rechunk(a, (13,), str(tmp_path / "o2.zarr"), max_mem="2KB").execute()[:], one)
    four = np.random.default_rng(1).integers(0, 1000, (6, 7, 8, 9)).astype("i4")
    b = cs.array(four, store=str(tmp_path / "four.zarr"), chunks=(2, 3, 4, 5))
    out = csd.rechunk(b, (6, 1, 8, 2), str(tmp_path / "f2.zarr"), max_mem="20KB").execute()
    np.testing.assert_array_equal(out[:], four)


def test_rechunk_refuses_impossible_plan(tmp_path, data):
    a = cs.array(data, chunks=(37, 53, 11))
    with pytest.raises(csd.PlanError, match="max_mem"):
        csd.rechunk(a, (1, 1, 1), str(tmp_path / "x.zarr"), max_mem="10KB")
    assert not (tmp_path / "x.zarr").exists()  # refused before anything was written


@pytest.mark.parametrize("axes", [(2, 1, 0), (1, 0, 2), (2, 0, 1), None])
def test_transpose_default_chunks(tmp_path, data, axes):
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(5, 7, 3),
                 dimension_names=["x", "y", "z"])
    out = csd.transpose(a, axes, str(tmp_path / "t.zarr"), max_mem="100KB")
    expected = np.transpose(data, axes)
    np.testing.assert_array_equal(out[:], expected)
    perm = axes or (2, 1, 0)
    assert out.chunks == tuple((5, 7, 3)[i] for i in perm)


def test_transpose_other_chunks_two_stages(tmp_path, data):
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(37, 1, 11))
    out = csd.transpose(a, (1, 2, 0), str(tmp_path / "t.zarr"), chunks=(1, 11, 37),
                        max_mem="30KB")
    np.testing.assert_array_equal(out[:], data.transpose(1, 2, 0))


def test_progress_bar_threaded(tmp_path, data, capsys):
    a = cs.array(data, chunks=(5, 7, 3))
    csd.rechunk(a, (37, 53, 1), str(tmp_path / "p.zarr"), progress=True).execute()
    assert "100%" in capsys.readouterr().out


def test_from_store_after_shrink_reads_the_arrays_fill(tmp_path):
    """Beyond a new edge a block reads ``Array.read_fill`` (public: the Dask layer uses
    no private part of Array): the fill value, or the dtype's zero for a v2 null one."""
    p = str(tmp_path / "a.zarr")
    a = cs.create_array(p, shape=(6,), chunks=(3,), dtype="i4", fill_value=7)
    a[:] = np.arange(1, 7)
    assert a.read_fill == 7
    x = csd.from_store(p)
    cs.open_array(p).resize(2)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), [1, 2, 7, 7, 7, 7])
    null = cs.create_array(None, shape=(2,), chunks=(2,), dtype="f8", zarr_format=2,
                           fill_value=None)
    assert null.read_fill == 0 and null[:].tolist() == [0.0, 0.0]
