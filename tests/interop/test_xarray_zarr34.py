"""xarray with zarr-python >= 3.4 (its rectilinear grids behind
``array.rectilinear_chunks``; skipped on an older zarr or without xarray): a Dataset of
irregular dask chunks written by ``cs.xarray.to_store`` is read by ``xr.open_zarr``
identical, in the same chunks, with the same ``preferred_chunks`` as
``engine="chunkstore"`` gives; arrays streamed by ``append(new_chunk=True)`` are read by
zarr-python chunk for chunk."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
pytest.importorskip("dask")

if "rectilinear_chunks" not in (zarr.config.get("array") or {}):
    pytest.skip(f"zarr {zarr.__version__} has no rectilinear chunk grids (3.4+)",
                allow_module_level=True)

from tests.xarray.test_xarray_backend import make_dataset  # noqa: E402  (after the skips)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::RuntimeWarning")


@pytest.fixture(autouse=True)
def rectilinear_on():
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


def test_open_zarr_reads_to_store_of_irregular_chunks(tmp_path):
    ds = make_dataset()
    ds["temperature"] = ds.temperature.chunk({"time": (1, 3, 2), "y": (3, 1), "x": (2, 3)})
    ds["packed"] = ds.packed.chunk({"time": (1, 5)})
    path = str(tmp_path / "irr.zarr")
    cs.xarray.to_store(ds, path)
    theirs = xr.open_zarr(path)  # consolidated metadata, dask per stored chunk
    ours = xr.open_dataset(path, engine="chunkstore", chunks={})
    for name in ("temperature", "packed"):
        assert theirs[name].chunks == ours[name].chunks == ds[name].chunks
        assert theirs[name].encoding["preferred_chunks"] == \
            ours[name].encoding["preferred_chunks"]
        assert theirs[name].encoding["chunks"] == ours[name].encoding["chunks"]
    xr.testing.assert_identical(theirs.load(), make_dataset())
    xr.testing.assert_identical(ours.load(), theirs)


def test_zarr_reads_arrays_streamed_with_new_chunks(tmp_path):
    where = str(tmp_path / "s.zarr")
    a = cs.create_array(where, shape=(0, 3), chunks=((4,), (2, 1)), dtype="i4")
    rows = []
    for k, n in enumerate([5, 1, 7, 2]):
        block = np.full((n, 3), k, "i4")
        a.append(block, new_chunk=True)
        rows.append(block)
    z = zarr.open_array(where, mode="r")
    assert z.read_chunk_sizes == ((5, 1, 7, 2), (2, 1))
    np.testing.assert_array_equal(z[:], np.concatenate(rows))
    # and zarr's own append on it grows the grid the way chunkstore's default does
    zw = zarr.open_array(where, mode="r+")
    zw.append(np.full((3, 3), 9, "i4"))
    ours = cs.open_array(where, mode="r+")
    assert ours.read_chunk_sizes == ((5, 1, 7, 2, 3), (2, 1))
    ours.append(np.full((2, 3), 8, "i4"))
    assert zarr.open_array(where, mode="r").read_chunk_sizes == ((5, 1, 7, 2, 3, 2), (2, 1))
