"""xarray and dask read what chunkstore writes.

A small "weather" group (a 3-d data variable, 1-d coordinates, attributes) is written by
chunkstore in Zarr v3 (dimension names in ``dimension_names``) and v2 (dimension names in
the ``_ARRAY_DIMENSIONS`` attribute, xarray's convention), consolidated or not, and then
read with ``xarray.open_zarr`` / ``xarray.open_dataset(engine="zarr")`` and with
``dask.array.from_zarr``. Every value is compared with the NumPy source. zarr-python is
only used here because xarray and dask read through it.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask  # noqa: F401  (cs.dask is not imported by `import chunkstore`)

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")

NT, NY, NX = 6, 10, 12
TIME = np.arange(1, NT + 1, dtype="i8") * 3600
Y = np.linspace(-45.0, 45.0, NY)
X = np.linspace(0.5, 359.5, NX)
TEMP = (np.arange(NT * NY * NX, dtype="f4").reshape(NT, NY, NX) / 7.0 + 250.0)
# a second variable with missing values: NaN is its fill value, one block never written
PRECIP = np.random.default_rng(7).random((NY, NX)).astype("f8")
GROUP_ATTRS = {"title": "chunkstore weather", "source": "synthetic", "version": 2}


def _dims(zarr_format: int, names: list[str]) -> dict:
    """How each format records dimension names for xarray."""
    if zarr_format == 3:
        return {"dimension_names": names}
    return {"attributes": {"_ARRAY_DIMENSIONS": names}}


def _with_attrs(kw: dict, attrs: dict) -> dict:
    kw = dict(kw)
    kw["attributes"] = {**kw.get("attributes", {}), **attrs}
    return kw


def write_weather(path: str, zarr_format: int, consolidated: bool) -> None:
    """The dataset, written by chunkstore only."""
    root = cs.group(path, zarr_format=zarr_format, attributes=GROUP_ATTRS)
    temp = root.create_array(
        "temperature", shape=TEMP.shape, dtype=TEMP.dtype, chunks=(2, 5, 4),
        fill_value=np.nan,
        **_with_attrs(_dims(zarr_format, ["time", "y", "x"]),
                      {"units": "K", "long_name": "air temperature"}))
    temp[...] = TEMP
    precip = root.create_array(
        "precip", shape=PRECIP.shape, dtype="f8", chunks=(5, 6), fill_value=np.nan,
        **_with_attrs(_dims(zarr_format, ["y", "x"]), {"units": "mm"}))
    precip[:5, :] = PRECIP[:5, :]  # the chunks of rows 5..9 stay unwritten
    for name, values, units in (("time", TIME, "s"), ("y", Y, "degrees_north"),
                                ("x", X, "degrees_east")):
        coord = root.create_array(name, shape=values.shape, dtype=values.dtype,
                                  chunks=values.shape, fill_value=-1,
                                  **_with_attrs(_dims(zarr_format, [name]), {"units": units}))
        coord[:] = values
    if consolidated:
        cs.consolidate_metadata(path)


def expected_precip() -> np.ndarray:
    out = PRECIP.copy()
    out[5:, :] = np.nan
    return out


@pytest.fixture(params=[(3, False), (3, True), (2, False), (2, True)],
                ids=["v3", "v3-consolidated", "v2", "v2-consolidated"])
def weather(request, tmp_path):
    zarr_format, consolidated = request.param
    path = str(tmp_path / "weather.zarr")
    write_weather(path, zarr_format, consolidated)
    return path, zarr_format, consolidated


def check_dataset(ds) -> None:
    assert set(ds.data_vars) == {"temperature", "precip"}
    assert set(ds.coords) == {"time", "y", "x"}
    assert ds["temperature"].dims == ("time", "y", "x")
    assert ds["precip"].dims == ("y", "x")
    assert ds.attrs == GROUP_ATTRS
    assert ds["temperature"].attrs["units"] == "K"
    assert ds["temperature"].attrs["long_name"] == "air temperature"
    assert ds["precip"].attrs["units"] == "mm"
    assert ds["x"].attrs["units"] == "degrees_east"
    np.testing.assert_array_equal(ds["temperature"].values, TEMP)
    assert ds["temperature"].dtype == TEMP.dtype
    np.testing.assert_array_equal(ds["precip"].values, expected_precip())
    np.testing.assert_array_equal(ds["time"].values, TIME)
    np.testing.assert_array_equal(ds["y"].values, Y)
    np.testing.assert_array_equal(ds["x"].values, X)
    # label-based selection goes through the coordinates we wrote
    point = ds["temperature"].sel(time=TIME[3], y=Y[2], x=X[7]).values
    assert point == TEMP[3, 2, 7]


def test_open_zarr_reads_chunkstore_group(weather):
    path, zarr_format, consolidated = weather
    with xr.open_zarr(path, consolidated=consolidated, zarr_format=zarr_format,
                      decode_times=False) as ds:
        # open_zarr is lazy: the data variables are dask arrays on the stored chunks
        assert ds["temperature"].chunks == ((2, 2, 2), (5, 5), (4, 4, 4))
        check_dataset(ds)
        mean = float(ds["temperature"].mean().compute())
        assert mean == pytest.approx(float(TEMP.astype("f8").mean()), rel=1e-6)


def test_open_dataset_engine_zarr_reads_chunkstore_group(weather):
    path, zarr_format, consolidated = weather
    with xr.open_dataset(path, engine="zarr", consolidated=consolidated,
                         zarr_format=zarr_format, decode_times=False) as ds:
        check_dataset(ds)


def test_consolidated_only_opens_with_consolidated_metadata(tmp_path):
    """xarray's ``consolidated=True`` must find chunkstore's consolidated document..."""
    path = str(tmp_path / "plain.zarr")
    write_weather(path, 2, consolidated=False)
    with pytest.raises(Exception):  # noqa: B017  (xarray/zarr raise different types by version)
        xr.open_zarr(path, consolidated=True, zarr_format=2)


def test_dataset_written_by_xarray_reads_back_in_chunkstore(tmp_path):
    """...and the other way round: xarray writes, chunkstore reads names and values."""
    path = str(tmp_path / "from_xarray.zarr")
    ds = xr.Dataset({"temperature": (("time", "y", "x"), TEMP, {"units": "K"})},
                    coords={"y": Y, "x": X}, attrs={"title": "from xarray"})
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    root = cs.open_group(path, mode="r")
    assert root.attrs["title"] == "from xarray"
    temp = root["temperature"]
    assert temp.dimension_names == ("time", "y", "x")
    assert temp.attrs["units"] == "K"
    np.testing.assert_array_equal(temp[...], TEMP)
    np.testing.assert_array_equal(root["x"][:], X)


def test_dask_from_zarr_reads_group_members(weather):
    path, _, _ = weather
    x = da.from_zarr(path, component="temperature")
    assert x.chunks == ((2, 2, 2), (5, 5), (4, 4, 4))
    np.testing.assert_array_equal(x.compute(), TEMP)
    np.testing.assert_array_equal(da.from_zarr(path, component="precip").compute(),
                                  expected_precip())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_dask_from_zarr_reads_root_array(tmp_path, zarr_format):
    path = str(tmp_path / "root.zarr")
    data = np.arange(35 * 18, dtype="i2").reshape(35, 18)
    cs.array(data, store=path, chunks=(10, 7), zarr_format=zarr_format)
    x = da.from_zarr(path)
    assert x.chunks == ((10, 10, 10, 5), (7, 7, 4))
    np.testing.assert_array_equal(x.compute(), data)
    # and the result of a dask computation written back by chunkstore reads the same
    out = str(tmp_path / "doubled.zarr")
    cs.dask.to_store(x * 2, out, zarr_format=zarr_format)
    np.testing.assert_array_equal(da.from_zarr(out).compute(), data * 2)


def test_v2_dimension_names_are_not_silently_dropped(tmp_path):
    path = str(tmp_path / "v2dims.zarr")
    root = cs.group(path, zarr_format=2)
    try:
        arr = root.create_array("t", shape=(3, 4), dtype="f4", chunks=(3, 2),
                                dimension_names=["y", "x"])
    except (ValueError, cs.ChunkstoreError) as e:  # refusing loudly, as zarr-python does, is fine
        assert "dimension" in str(e) and ("/t" in str(e) or "'t'" in str(e))
        return
    arr[...] = 1.5
    assert cs.open_array(path, mode="r", path="t").dimension_names == ("y", "x")
    with xr.open_zarr(path, consolidated=False, zarr_format=2) as ds:
        assert ds["t"].dims == ("y", "x")
        np.testing.assert_array_equal(ds["t"].values, np.full((3, 4), 1.5, "f4"))
