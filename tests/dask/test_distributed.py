"""The Dask layer on a real distributed.LocalCluster with worker processes."""

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.storage.resolve import resolve_store

distributed = pytest.importorskip("distributed")


@pytest.fixture
def data():
    """240 KB: more than the rechunks' max_mem (200KB), so their plans take two stages."""
    return np.random.default_rng(2).standard_normal((32, 48, 20))


def test_from_store_on_cluster(client, tmp_path, data):
    cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(8, 48, 2))
    x = csd.from_store(str(tmp_path / "a.zarr"))
    assert np.isclose(x.sum().compute(), data.sum())
    np.testing.assert_array_equal(x[10:20, ::3].compute(), data[10:20, ::3])


def test_to_store_unaligned_on_cluster(client, tmp_path, data):
    import dask.array as da
    x = da.from_array(data, chunks=(9, 10, 7))
    csd.to_store(x, str(tmp_path / "b.zarr"), chunks=(16, 16, 4))
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "b.zarr"))[:], data)


def test_rechunk_and_transpose_on_cluster(client, tmp_path, data):
    cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(8, 48, 2))
    plan = csd.rechunk(str(tmp_path / "a.zarr"), (32, 4, 20), str(tmp_path / "c.zarr"),
                       max_mem="200KB")
    assert len(plan.stages) == 2
    np.testing.assert_array_equal(plan.execute()[:], data)
    out = csd.transpose(str(tmp_path / "a.zarr"), (2, 1, 0), str(tmp_path / "t.zarr"),
                        max_mem="200KB", progress=True)
    np.testing.assert_array_equal(out[:], data.T)


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_rechunk_transpose_on_s3_through_the_cluster(client, s3_bucket, data, backend):
    """Workers re-open the store (FsspecStore, or ObstoreStore: the default of s3:// URLs
    when obstore is installed) on a real S3 endpoint (moto) from the pickled Array."""
    if backend == "obstore":
        pytest.importorskip("obstore")
    root, options = s3_bucket
    options = {**options, "backend": backend}
    src = cs.array(data, store=f"{root}/src.zarr", chunks=(8, 48, 2), storage_options=options)
    assert src.store.backend == backend
    store = resolve_store(f"{root}/out.zarr", storage_options=options)
    assert type(store) is type(src.store)
    plan = csd.rechunk(src, (32, 4, 20), store, path="re", max_mem="200KB")
    assert len(plan.stages) == 2
    out = plan.execute()
    np.testing.assert_array_equal(out[:], data)
    assert sorted(cs.open_group(store, mode="r").keys()) == ["re"]  # intermediates removed
    t = csd.transpose(src, (2, 1, 0), store, path="t", max_mem="200KB")
    np.testing.assert_array_equal(t[:], data.T)
    x = csd.from_store(src)
    csd.to_store(x * 2, store, path="twice", chunks=(16, 16, 5))
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="twice")[:], data * 2)


def test_to_store_on_an_s3_url_with_storage_options(client, s3_bucket, data):
    """``to_store(x, "s3://...", storage_options=...)`` (the notebook's call): the options
    open the target once (they were passed a second time to a resolved store: TypeError),
    both when creating it and when writing a region into it. (The default backend:
    obstore when installed.)"""
    import dask.array as da
    root, options = s3_bucket
    x = da.from_array(data, chunks=(8, 48, 5))
    out = csd.to_store(x, f"{root}/by-url.zarr", path="field", storage_options=options,
                       overwrite=True, attributes={"units": "1"})
    np.testing.assert_array_equal(out[:], data)
    assert out.attrs["units"] == "1"
    csd.to_store(x[:8] * 3, f"{root}/by-url.zarr", path="field", storage_options=options,
                 region=(slice(0, 8), slice(None), slice(None)))
    back = cs.open_array(f"{root}/by-url.zarr", path="field", mode="r", storage_options=options)
    np.testing.assert_array_equal(back[:8], data[:8] * 3)
    np.testing.assert_array_equal(back[8:], data[8:])
