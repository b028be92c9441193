"""xarray and rectilinear chunk grids (issue 33): ``cs.xarray.to_store`` writes a Dataset
as ``to_zarr`` does (the same documents, attributes, fill values and dimension names, by
xarray's own CF coders) and irregular dask chunks as v3 rectilinear grids, one chunk per
block; ``engine="chunkstore"`` reads them back identical, with the stored chunks as
``preferred_chunks`` in the zarr engine's form (an int per regular dimension, a tuple
per irregular one), so ``chunks={}`` gives the very dask chunks written."""

from __future__ import annotations

import json
import warnings

import pytest

import chunkstore as cs

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
pytest.importorskip("zarr")

from tests.xarray.test_xarray_backend import make_dataset  # noqa: E402  (after the importorskips)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::RuntimeWarning")

IRREGULAR = {"temperature": {"time": (1, 3, 2), "y": (3, 1), "x": (2, 3)},
             "packed": {"time": (4, 2)}}


IRREGULAR_TEMPERATURE = ((1, 3, 2), (3, 1), (2, 3))


def irregular_dataset() -> xr.Dataset:
    ds = make_dataset()
    for name, chunks in IRREGULAR.items():
        ds[name] = ds[name].chunk(chunks)
    return ds


def test_irregular_dask_chunks_round_trip_as_rectilinear(tmp_path):
    ds = irregular_dataset()
    path = str(tmp_path / "irr.zarr")
    group = cs.xarray.to_store(ds, path)
    assert isinstance(group, cs.Group)
    for name in IRREGULAR:
        a = cs.open_array(path, path=name, mode="r")
        assert a.read_chunk_sizes == ds[name].chunks  # one stored chunk per dask block
        doc = json.loads((tmp_path / "irr.zarr" / name / "zarr.json").read_text())
        # (4, 2) is a regular grid of 4 with a shorter last chunk
        assert doc["chunk_grid"]["name"] == ("rectilinear" if name == "temperature"
                                             else "regular")
        assert doc["dimension_names"] == list(ds[name].dims)
    back = xr.open_dataset(path, engine="chunkstore", chunks={})
    for name in IRREGULAR:
        assert back[name].chunks == ds[name].chunks
    prefer = back["temperature"].encoding["preferred_chunks"]
    assert prefer == {"time": (1, 3, 2), "y": 3, "x": (2, 3)}  # the zarr engine's form
    assert back["temperature"].encoding["chunks"] == ((1, 3, 2), 3, (2, 3))
    xr.testing.assert_identical(back.load(), make_dataset())
    xr.testing.assert_identical(xr.open_dataset(path, engine="chunkstore").load(),
                                make_dataset())


def test_each_block_is_written_once_and_no_chunk_read(tmp_path):
    """The blocks are the chunks: writing reads no chunk and writes each chunk once."""
    reads, writes = [], []

    class Logged(dict):
        def __getitem__(self, k):
            reads.append(k)
            return super().__getitem__(k)

        def get(self, k, default=None):
            reads.append(k)
            return super().get(k, default)

        def __setitem__(self, k, v):
            writes.append(k)
            super().__setitem__(k, v)

    store = cs.MemoryStore(Logged())
    cs.xarray.to_store(irregular_dataset(), store, consolidated=False)
    chunk_writes = [k for k in writes if k.startswith("temperature/c/")]
    assert len(chunk_writes) == len(set(chunk_writes)) == 3 * 2 * 2
    chunk_reads = {k for k in reads if k.startswith("temperature/c/")}
    # at most an existence probe of keys that were not there yet; no chunk decoded twice
    assert chunk_reads <= set(chunk_writes)


@pytest.mark.parametrize("fmt", [2, 3])
def test_same_documents_as_to_zarr(tmp_path, fmt):
    """Regular chunks: what ``to_zarr`` writes (zarr-python underneath), attribute for
    attribute, fill value, data type and dimension names; both read back identical."""
    ds = make_dataset()
    ds["temperature"] = ds.temperature.chunk({"time": 2, "y": 2})
    ds["packed"] = ds.packed.chunk({"time": 3})
    ref, ours = str(tmp_path / "ref.zarr"), str(tmp_path / "ours.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(ref, zarr_format=fmt)
    cs.xarray.to_store(ds, ours, zarr_format=fmt)
    a, b = cs.open_group(ref, mode="r"), cs.open_group(ours, mode="r")
    assert dict(a.attrs) == dict(b.attrs) == ds.attrs
    names = sorted(n for n, _ in a.arrays())
    assert names == sorted(n for n, _ in b.arrays())
    for name in names:
        x, y = a[name], b[name]
        assert dict(x.attrs) == dict(y.attrs), name
        assert x.dtype == y.dtype, name
        assert str(x.fill_value) == str(y.fill_value), name
        assert getattr(x.metadata, "dimension_names", None) == \
            getattr(y.metadata, "dimension_names", None), name
    assert b["temperature"].chunks == (2, 2, NX_OF(ds))
    assert "units" in dict(b["time"].attrs) and "calendar" in dict(b["time"].attrs)
    assert dict(b["packed"].attrs)["scale_factor"] == 0.25
    xr.testing.assert_identical(xr.open_dataset(ours, engine="chunkstore").load(),
                                xr.open_dataset(ref, engine="chunkstore").load())
    xr.testing.assert_identical(xr.open_dataset(ours, engine="chunkstore").load(), make_dataset())
    # consolidated, as to_zarr's default
    if fmt == 3:
        doc = json.loads((tmp_path / "ours.zarr" / "zarr.json").read_text())
        assert set(doc["consolidated_metadata"]["metadata"]) >= set(names)
    else:
        assert (tmp_path / "ours.zarr" / ".zmetadata").exists()


def NX_OF(ds):  # noqa: N802  (the x dimension's length)
    return ds.sizes["x"]


def test_v2_refuses_irregular_chunks_and_modes(tmp_path):
    path = str(tmp_path / "v2.zarr")
    with pytest.raises(ValueError, match="irregular chunks"):
        cs.xarray.to_store(irregular_dataset(), path, zarr_format=2)
    assert not (tmp_path / "v2.zarr").exists()  # refused before anything was written
    # a loaded dataset keeps its stored grid (encoding "chunks"): v3 again, not v2
    irr = str(tmp_path / "irr.zarr")
    cs.xarray.to_store(irregular_dataset(), irr)
    loaded = xr.open_dataset(irr, engine="chunkstore").load()
    cs.xarray.to_store(loaded, str(tmp_path / "again.zarr"))
    assert cs.open_array(str(tmp_path / "again.zarr"), path="temperature",
                         mode="r").read_chunk_sizes == IRREGULAR_TEMPERATURE
    with pytest.raises(ValueError, match="irregular chunks"):
        cs.xarray.to_store(loaded, path, zarr_format=2)
    ds = make_dataset()
    where = str(tmp_path / "m.zarr")
    cs.xarray.to_store(ds, where)
    with pytest.raises(Exception, match="exist|contains"):
        cs.xarray.to_store(ds, where)  # mode "w-": refuses what is there
    cs.xarray.to_store(ds.isel(time=slice(0, 2)), where, mode="w")
    assert xr.open_dataset(where, engine="chunkstore").sizes["time"] == 2
    with pytest.raises(ValueError, match="mode"):
        cs.xarray.to_store(ds, where, mode="a")
    with pytest.raises(ValueError, match="not in the dataset"):
        cs.xarray.to_store(ds, where, mode="w", encoding={"nope": {}})


def test_encoding_argument_passes_codecs(tmp_path):
    path = str(tmp_path / "enc.zarr")
    cs.xarray.to_store(make_dataset(), path, encoding={
        "temperature": {"chunks": (3, 2, 5), "compressors": None}})
    a = cs.open_array(path, path="temperature", mode="r")
    assert a.chunks == (3, 2, 5) and a.compressors == ()
