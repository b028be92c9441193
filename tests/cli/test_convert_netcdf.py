"""``chunkstore convert`` of netCDF-4 / HDF5 files (issue 34 item 1, issue 30 item 5):
a netCDF file written by xarray converts as a group that xarray reads back as the same
Dataset (v3 and v2, through zarr-python and through chunkstore's engine); files whose
bytes live in other files are refused in one line, nothing created, unless
``--allow-external`` names the directory."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import chunkstore as cs
from tests.api.test_hdf5_sources import SECRET, dirs  # noqa: F401 (a fixture)

from .conftest import run_in_process

h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")



@pytest.fixture
def run(monkeypatch, tmp_path):
    """``chunkstore ARGV`` in this process, in ``tmp_path``, output to pipes."""
    monkeypatch.chdir(tmp_path)

    def go(*argv):
        return run_in_process("pipe", *map(str, argv), monkeypatch=monkeypatch)
    return go


def _netcdf(path):
    """What users convert: xarray's netCDF-4 (h5netcdf), with coordinates (a time axis, a
    2-d one), CF attributes, a NaN and an integer _FillValue, a dimension without a
    variable, strings, a scalar with a NaN attribute and an infinite global one."""
    pytest.importorskip("h5netcdf")
    import pandas as pd
    temp = np.arange(60, dtype="f4").reshape(4, 3, 5)
    temp[0, 0, 0] = np.nan
    count = np.arange(10, dtype="i4").reshape(2, 5)
    count[0, 0] = -999
    ds = xr.Dataset(
        {"temp": (("time", "y", "x"), temp,
                  {"units": "K", "standard_name": "air_temperature",
                   "valid_range": np.array([0.0, 400.0], "f4")}),
         "count": (("n", "x"), count, {"flag": np.int8(1)}),
         "name": (("n",), np.array(["alpha", "βeta"])),
         "scalar": ((), 3.5, {"missing_value": np.nan})},
        coords={"time": pd.date_range("2000-01-01", periods=4),
                "y": ("y", [10.0, 20.0, 30.0], {"units": "m", "axis": "Y"}),
                "x": np.arange(5), "lat": (("y", "x"), np.linspace(0, 1, 15).reshape(3, 5))},
        attrs={"title": "test", "Conventions": "CF-1.8", "inf_attr": np.inf})
    ds["temp"].encoding["_FillValue"] = np.nan
    ds["count"].encoding["_FillValue"] = -999
    ds.to_netcdf(path, engine="h5netcdf")
    return path


@pytest.mark.parametrize("fmt", [3, 2])
def test_netcdf_round_trip_gives_the_same_dataset(run, tmp_path, fmt):
    nc = _netcdf(tmp_path / "in.nc")
    out = tmp_path / "out.zarr"
    result = run("convert", nc, out, "--zarr-format", fmt)
    assert result.status == 0, result.err
    assert "note:" not in result.err and "a group of 8 arrays" in result.err
    with xr.open_dataset(nc) as expected:
        expected.load()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # consolidated: xarray opens it without a warning
            via_zarr = xr.open_zarr(out).load()
        via_chunkstore = xr.open_dataset(out, engine="chunkstore").load()
    xr.testing.assert_identical(via_zarr, expected)
    xr.testing.assert_identical(via_chunkstore, expected)
    assert via_chunkstore["count"].isnull().sum() == 1  # the int _FillValue masks -999
    g = cs.open_group(str(out), mode="r")
    assert "n" not in g and g["count"].fill_value == -999  # "n" is a dimension only
    assert np.isnan(g["temp"].fill_value)


def test_one_variable(run, tmp_path):
    nc = _netcdf(tmp_path / "in.nc")
    assert run("convert", nc, tmp_path / "t.zarr", "--node", "temp").status == 0
    a = cs.open_array(str(tmp_path / "t.zarr"), mode="r")
    assert a.dimension_names == ("time", "y", "x") and np.isnan(a.fill_value)
    assert a.attrs["units"] == "K" and "DIMENSION_LIST" not in a.attrs
    with xr.open_dataset(nc) as ds:
        np.testing.assert_array_equal(a[:], ds["temp"].values)


def test_skipped_attribute_is_a_note(run, tmp_path):
    with h5py.File(tmp_path / "r.h5", "w") as f:
        f["a"] = np.arange(3)
        f["b"] = np.arange(4)
        f["b"].attrs["ref"] = f["a"].ref
        f["b"].attrs["units"] = b"m"
    result = run("convert", "r.h5", "o.zarr")
    assert result.status == 0, result.err
    notes = [line for line in result.err.splitlines() if ": note: " in line]
    assert notes == ["chunkstore convert: note: r.h5: dataset '/b': attribute 'ref' skipped: "
                     "an HDF5 object reference, which has no JSON form"]
    g = cs.open_group(str(tmp_path / "o.zarr"), mode="r")
    assert dict(g["b"].attrs) == {"units": "m"}
    np.testing.assert_array_equal(g["a"][:], np.arange(3))


def test_groups_are_copied_whole_and_refused_where_one_array_is_meant(run, tmp_path):
    with h5py.File(tmp_path / "g.h5", "w") as f:
        f.create_dataset("grp/data", data=np.arange(6).reshape(2, 3), chunks=(1, 3))
        f["grp"].attrs["k"] = 1
        f["top"] = np.ones(2)
    assert run("convert", "g.h5", "o.zarr", "--node", "grp").status == 0
    g = cs.open_group(str(tmp_path / "o.zarr"), mode="r")
    assert dict(g.attrs) == {"k": 1} and g["data"].chunks == (1, 3)
    np.testing.assert_array_equal(g["data"][:], np.arange(6).reshape(2, 3))
    for argv, words in [(["g.npy"], ["g.h5", "a .npy file holds one", "--node"]),
                        (["x.zarr", "--chunks", "1,1"], ["--chunks", "a group of 2 arrays"])]:
        result = run("convert", "g.h5", *argv)
        assert result.status == 2 and len(result.err_lines) == 1, result.err
        assert all(w in result.err for w in words), result.err
        assert not (tmp_path / argv[0]).exists()


def _evil(kind, inside, outside):
    path = inside / "evil.nc"
    with h5py.File(path, "w") as f:
        if kind == "external storage":
            f.create_dataset("x", shape=(45,), dtype="u1",
                             external=[(str(outside / "secret.bin"), 0, 45)])
        elif kind == "external link":
            f["x"] = h5py.ExternalLink(str(outside / "src.h5"), "/data")
        else:
            layout = h5py.VirtualLayout(shape=(45,), dtype="u1")
            layout[:] = h5py.VirtualSource(str(outside / "src.h5"), "data", shape=(45,))
            f.create_virtual_dataset("x", layout)
    return path


@pytest.mark.parametrize("kind", ["external storage", "external link", "virtual dataset"])
def test_other_files_are_refused_in_one_line(run, tmp_path, dirs, kind):  # noqa: F811
    inside, outside = dirs
    nc = _evil(kind, inside, outside)
    read = outside / ("secret.bin" if kind == "external storage" else "src.h5")
    for extra in ([], ["--allow-external", inside]):
        result = run("convert", nc, "out.zarr", *extra)
        assert result.status == 2 and len(result.err_lines) == 1, result.err
        line = result.err_lines[0]
        assert line.startswith("chunkstore convert: error: ") and "'/x'" in line, line
        assert str(nc) in line and f"'{read}'" in line, line
        assert ("outside the allowed" in line) == bool(extra), line
        assert not (tmp_path / "out.zarr").exists()
    result = run("convert", nc, "out.zarr", "--allow-external", inside, "--allow-external",
                 outside)
    assert result.status == 0, result.err
    assert bytes(cs.open_group(str(tmp_path / "out.zarr"), mode="r")["x"][:]) == SECRET
