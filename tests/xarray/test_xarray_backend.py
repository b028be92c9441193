"""``xr.open_dataset(..., engine="chunkstore")`` gives what ``engine="zarr"`` gives.

Datasets with coordinates, CF encodings (scale_factor/add_offset, _FillValue), strings
(variable-length, fixed-width unicode and bytes) and times (datetime64 and timedelta64
with units and calendar) are written by xarray's own ``to_zarr`` (zarr-python underneath:
a test-only peer) in Zarr v2 and v3, and by chunkstore alone; each is read with both
engines and compared with ``xr.testing.assert_identical``, for the ``open_zarr`` options
(chunks, consolidated, decode_times, mask_and_scale, drop_variables, group,
storage_options, zarr_format, use_zarr_fill_value_as_mask). Reads are lazy: only the
chunks a selection needs are read, through ``a[...]`` / ``a.oindex`` / ``a.vindex``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import subprocess
import sys
import uuid
import warnings

import numpy as np
import pytest

import chunkstore as cs

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
pytest.importorskip("zarr")
pytest.importorskip("dask")

from chunkstore.xarray_backend import (  # noqa: E402  (after the importorskips)
    ChunkstoreArrayWrapper,
    ChunkstoreBackendEntrypoint,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore::RuntimeWarning",  # the zarr engine's "consolidated metadata" fallback note
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning",
)

NT, NX, NY = 6, 5, 4


def make_dataset() -> xr.Dataset:
    """Coordinates, attributes, CF encodings, strings and times."""
    rng = np.random.default_rng(14)
    temp = (rng.random((NT, NY, NX)) * 30 + 270).astype("f4")
    temp[0, 0, 0] = np.nan
    packed = np.round(rng.random((NT, NY)) * 400) / 4  # exact in int16 * 0.25
    packed[1, 2] = np.nan
    ds = xr.Dataset(
        {
            "temperature": (("time", "y", "x"), temp,
                            {"units": "K", "long_name": "air temperature"}),
            "packed": (("time", "y"), packed, {"note": "int16 on disk"},
                       {"dtype": "i2", "scale_factor": 0.25, "add_offset": 5.0,
                        "_FillValue": -32768}),
            "count": (("x",), np.arange(NX, dtype="i4"), {}, {"_FillValue": -1}),
            "station": (("x",), np.array(["alpha", "béta", "", "delta", "e"], dtype=object)),
            "code": (("y",), np.array(["ab", "cd", "e", "fg"], dtype="U2")),
            "raw": (("y",), np.array([b"x1", b"y2", b"", b"z"], dtype="S2")),
            "lag": (("time",), pd.to_timedelta(np.arange(NT), unit="h").values, {},
                    {"units": "minutes"}),
            "flag": (("y",), np.array([True, False, True, True])),
        },
        coords={
            "time": ("time", pd.date_range("2001-02-03T04:00", periods=NT, freq="6h"), {},
                     {"units": "hours since 2000-01-01", "calendar": "proleptic_gregorian"}),
            "y": ("y", np.linspace(-10.0, 10.0, NY), {"units": "degrees_north"}),
            "x": ("x", np.arange(NX) * 2.5, {"units": "degrees_east"}),
            "label": ("x", np.array(list("vwxyz"))),
        },
        attrs={"title": "issue 14", "history": "written by to_zarr", "version": 3},
    )
    return ds


def to_zarr(ds: xr.Dataset, path, zarr_format: int, **kw) -> str:
    path = str(path)
    enc = {"temperature": {"chunks": (2, 2, 3)}}
    ds.to_zarr(path, zarr_format=zarr_format, encoding=kw.pop("encoding", enc), **kw)
    return path


def both(path, **kw) -> tuple[xr.Dataset, xr.Dataset]:
    """The dataset read by the zarr engine and by chunkstore, with the same options."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = xr.open_dataset(path, engine="zarr", **kw)
    ours = xr.open_dataset(path, engine="chunkstore", **kw)
    return ref, ours


def assert_same(path, **kw) -> xr.Dataset:
    ref, ours = both(path, **kw)
    xr.testing.assert_identical(ref.load(), ours.load())
    return ours


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def fmt(request) -> int:
    return request.param


@pytest.fixture
def written(tmp_path, fmt) -> str:
    return to_zarr(make_dataset(), tmp_path / "d.zarr", fmt)


# -- written by xarray's to_zarr (zarr-python) ---------------------------------------------
def test_roundtrip_identical_to_zarr_engine(written, fmt):
    ours = assert_same(written)
    xr.testing.assert_identical(ours, make_dataset())  # and to what was written
    assert ours["packed"].encoding["scale_factor"] == 0.25
    assert ours["packed"].encoding["dtype"] == np.dtype("i2")
    assert ours["time"].encoding["units"] == "hours since 2000-01-01"
    assert ours["time"].encoding["calendar"] == "proleptic_gregorian"
    assert ours["temperature"].encoding["chunks"] == (2, 2, 3)
    assert ours["temperature"].encoding["preferred_chunks"] == {"time": 2, "y": 2, "x": 3}


@pytest.mark.parametrize("options", [
    {"decode_times": False},
    {"mask_and_scale": False},
    {"decode_cf": False},
    {"decode_timedelta": False},
    {"concat_characters": False, "decode_coords": False},
    {"drop_variables": ["packed", "station"]},
], ids=lambda o: ",".join(o))
def test_open_zarr_options(written, options):
    ours = assert_same(written, **options)
    if "drop_variables" in options:
        assert "packed" not in ours and "station" not in ours
    if options.get("decode_times") is False:
        assert ours["time"].dtype.kind == "i" and "units" in ours["time"].attrs
    if options.get("mask_and_scale") is False:
        assert ours["packed"].dtype == np.dtype("i2")


def test_use_zarr_fill_value_as_mask(written, fmt):
    """The default is the zarr engine's (mask in v2, not in v3); the other choice is
    honoured too (xarray's zarr entrypoint drops the option: compare with its meaning)."""
    assert_same(written, use_zarr_fill_value_as_mask=fmt == 2)
    flipped = xr.open_dataset(written, engine="chunkstore",
                              use_zarr_fill_value_as_mask=fmt == 3)
    if fmt == 2:  # the int16 fill value -32768 is data now: -32768 * 0.25 + 5
        assert flipped["packed"].values[1, 2] == -8187.0
    else:  # the v3 fill_value 0 of "count" now masks its first value
        assert np.isnan(flipped["count"].values[0]) and flipped["count"].values[1] == 1


def test_chunks_give_dask_arrays_on_stored_chunks(written):
    ours = xr.open_dataset(written, engine="chunkstore", chunks={})
    ref = xr.open_dataset(written, engine="zarr", chunks={})
    assert ours["temperature"].chunks == ((2, 2, 2), (2, 2), (3, 2))
    for name in ref.data_vars:
        assert ours[name].chunks == ref[name].chunks, name
    xr.testing.assert_identical(ref.compute(), ours.compute())
    # "auto" sizes chunks by bytes: not for variable-length strings (dask refuses them)
    numeric = ["station", "label"]
    ref_auto, auto = both(written, chunks="auto", drop_variables=numeric)
    assert auto["temperature"].chunks == ref_auto["temperature"].chunks
    xr.testing.assert_identical(ref_auto.compute(), auto.compute())
    one = xr.open_dataset(written, engine="chunkstore", chunks=-1)
    assert one["temperature"].chunks == ((NT,), (NY,), (NX,))
    xr.testing.assert_identical(ref.compute(), one.compute())


def test_consolidated_options(tmp_path, fmt):
    plain = to_zarr(make_dataset(), tmp_path / "plain.zarr", fmt, consolidated=False)
    cons = to_zarr(make_dataset(), tmp_path / "cons.zarr", fmt, consolidated=True)
    for consolidated in (None, False):
        assert_same(plain, consolidated=consolidated)
    for consolidated in (None, True, False):
        assert_same(cons, consolidated=consolidated)
    with pytest.raises(Exception):  # noqa: B017  (zarr raises ValueError too)
        xr.open_dataset(plain, engine="chunkstore", consolidated=True)


def test_groups_and_datatree(tmp_path, fmt):
    path = str(tmp_path / "tree.zarr")
    ds = make_dataset()
    ds.to_zarr(path, zarr_format=fmt, consolidated=False)
    (ds[["temperature"]] * 2).to_zarr(path, group="run/a", zarr_format=fmt, mode="a",
                                      consolidated=False)
    ds[["count", "station"]].to_zarr(path, group="run/b", zarr_format=fmt, mode="a",
                                     consolidated=False)
    for group in ("run/a", "/run/b"):
        assert_same(path, group=group, consolidated=False)
    ref = xr.open_datatree(path, engine="zarr", consolidated=False)
    ours = xr.open_datatree(path, engine="chunkstore", consolidated=False)
    xr.testing.assert_identical(ref.load(), ours.load())
    assert set(ours.groups) == {"/", "/run", "/run/a", "/run/b"}


def test_sharded_v3(tmp_path):
    path = to_zarr(make_dataset(), tmp_path / "s.zarr", 3,
                   encoding={"temperature": {"chunks": (1, 2, 5), "shards": (2, 4, 5)}})
    ours = assert_same(path)
    assert ours["temperature"].encoding["chunks"] == (1, 2, 5)
    assert ours["temperature"].encoding["shards"] == (2, 4, 5)


def test_times_with_units_and_calendar(tmp_path, fmt):
    times = pd.date_range("1999-12-31T23:00", periods=8, freq="37min")
    ds = xr.Dataset({"v": (("t",), np.arange(8.0))},
                    coords={"t": times, "t_sec": ("t", times.values.astype("M8[s]"))})
    for i, (units, calendar) in enumerate([("minutes since 1999-12-31", "standard"),
                                           ("seconds since 1970-01-01", "gregorian"),
                                           ("days since 1900-01-01", "proleptic_gregorian")]):
        path = str(tmp_path / f"t{i}.zarr")
        ds.to_zarr(path, zarr_format=fmt, encoding={
            "t": {"units": units, "calendar": calendar, "dtype": "f8"}})
        ours = assert_same(path)
        assert ours["t"].encoding["units"] == units
        assert ours["t"].encoding["calendar"] == calendar
        np.testing.assert_array_equal(ours["t"].values, times.values)
        assert_same(path, decode_times=False)


def test_strings_of_every_kind(tmp_path, fmt):
    ds = xr.Dataset({
        "vlen": (("n",), np.array(["", "a", "ünïcode", "x" * 40], dtype=object)),
        "fixed": (("n",), np.array(["ab", "c", "", "de"], dtype="U2")),
        "raw": (("n",), np.array([b"a", b"bc", b"", b"\x00z"], dtype="S2")),
        "chars": (("n", "k"), np.array([[b"a", b"b"], [b"c", b"d"], [b"e", b""],
                                        [b"", b""]], dtype="S1"), {},
                  {"dtype": "S1"}),
    })
    path = str(tmp_path / "s.zarr")
    ds.to_zarr(path, zarr_format=fmt)
    ours = assert_same(path)
    assert ours["vlen"].values.tolist() == ["", "a", "ünïcode", "x" * 40]
    assert_same(path, concat_characters=False)


def test_fsspec_url_and_storage_options(fmt):
    url = f"memory://xr-{uuid.uuid4().hex}.zarr"
    to_zarr(make_dataset(), url, fmt)
    assert_same(url, storage_options={})
    ours = xr.open_dataset(url, engine="chunkstore", storage_options={"skip_instance_cache":
                                                                       False})
    xr.testing.assert_identical(ours.load(), make_dataset())


def test_zarr_format_option(written, fmt):
    ours = assert_same(written, zarr_format=fmt)
    assert ours.attrs["title"] == "issue 14"
    with pytest.raises(Exception):  # noqa: B017  (nothing in the other format there)
        xr.open_dataset(written, engine="chunkstore", zarr_format=5 - fmt)


# -- lazy reads ---------------------------------------------------------------------------
def _chunk_files(path: str, var: str) -> list[str]:
    root = os.path.join(path, var)
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if not f.startswith((".z", "zarr.json"))]
    return out


def test_nothing_read_until_needed(written, fmt):
    ours = xr.open_dataset(written, engine="chunkstore")
    wrapper = ours["temperature"].variable._data
    assert not isinstance(wrapper, np.ndarray)
    # every chunk but the one holding (time 0..1, y 0..1, x 0..2) disappears: opening and
    # a selection inside that chunk still work, so nothing else was or is read
    keep = "0.0.0" if fmt == 2 else os.path.join("c", "0", "0", "0")
    for f in _chunk_files(written, "temperature"):
        if not f.endswith(keep):
            os.remove(f)
    sel = ours["temperature"].isel(time=slice(0, 2), y=[0, 1], x=slice(1, 3)).values
    np.testing.assert_array_equal(sel, make_dataset()["temperature"].values[:2, :2, 1:3])
    shutil.rmtree(os.path.join(written, "packed"))  # never touched: opening already done
    assert ours["count"].values.tolist() == list(range(NX))


def test_outer_and_vectorized_indexing(written):
    ref, ours = both(written)
    t = xr.DataArray([0, 3, 5, 5], dims="p")
    y = xr.DataArray([3, 1, 0, 2], dims="p")
    cases = [
        {"time": [5, 0, 2], "x": slice(None, None, 2)},           # outer, step slice
        {"time": 1, "y": [True, False, True, True]},              # int + mask
        {"time": t, "y": y},                                      # vectorized (points)
        {"time": t, "y": y, "x": slice(1, 4)},                    # vectorized + slice
        {"time": xr.DataArray([[0, 1], [2, 3]], dims=("a", "b")), "x": [4, 0]},
        {"time": -1, "y": -1, "x": -1},                           # 0-d
    ]
    expected = make_dataset()["temperature"]
    for sel in cases:
        got = ours["temperature"].isel(sel)
        xr.testing.assert_identical(ref["temperature"].isel(sel).load(), got.load())
        xr.testing.assert_identical(expected.isel(sel), got)
    # the backend array itself, with each kind of xarray indexer
    raw = cs.open_array(written, mode="r", path="temperature")
    w = ChunkstoreArrayWrapper(raw)
    data = raw[...]
    ix = xr.core.indexing
    np.testing.assert_array_equal(w[ix.BasicIndexer((1, slice(None), slice(0, 5, 2)))],
                                  data[1, :, 0:5:2])
    np.testing.assert_array_equal(w[ix.OuterIndexer((np.array([0, 2]), slice(None),
                                                     np.array([4, 1])))],
                                  data[np.ix_([0, 2], range(NY), [4, 1])])
    np.testing.assert_array_equal(w[ix.VectorizedIndexer((np.array([0, 2]), slice(1, 3),
                                                          np.array([4, 1])))],
                                  data[[0, 2], 1:3, [4, 1]])  # points first, then the slice


def test_load_async(written):
    ours = xr.open_dataset(written, engine="chunkstore")
    loaded = asyncio.run(ours.load_async())
    xr.testing.assert_identical(loaded, make_dataset())


def test_pickles_for_dask_workers(written):
    ours = xr.open_dataset(written, engine="chunkstore", chunks={})
    again = pickle.loads(pickle.dumps(ours))
    xr.testing.assert_identical(again.compute(), make_dataset())


# -- written by chunkstore ----------------------------------------------------------------
def write_with_chunkstore(path: str, fmt: int, consolidated: bool) -> None:
    """A CF dataset written by chunkstore alone (dimension names in ``dimension_names``
    or ``_ARRAY_DIMENSIONS``; CF encodings as attributes)."""
    def dims(names):
        return ({"dimension_names": names} if fmt == 3 else
                {"attributes": {"_ARRAY_DIMENSIONS": names}})

    def attrs(kw, **extra):
        kw = dict(kw)
        kw["attributes"] = {**kw.get("attributes", {}), **extra}
        return kw

    root = cs.group(path, zarr_format=fmt, attributes={"title": "by chunkstore"})
    hours = np.arange(NT, dtype="i8") * 6
    root.create_array("time", data=hours, chunks=(4,), fill_value=None if fmt == 2 else 0,
                      **attrs(dims(["time"]), units="hours since 2020-01-01 00:00",
                              calendar="standard"))
    root.create_array("x", data=np.arange(NX) * 1.5, chunks=(NX,),
                      **attrs(dims(["x"]), units="m"))
    packed = np.arange(NT * NX, dtype="i2").reshape(NT, NX) * 7
    packed[2, 3] = -1
    root.create_array("level", data=packed, chunks=(4, 2),
                      fill_value=None if fmt == 2 else 0,
                      **attrs(dims(["time", "x"]), scale_factor=0.5, add_offset=10.0,
                              _FillValue=-1, units="cm"))
    temp = root.create_array("temp", shape=(NT, NX), dtype="f4", chunks=(3, 3),
                             fill_value=np.nan, **attrs(dims(["time", "x"]), units="K"))
    temp[:3] = np.arange(3 * NX, dtype="f4").reshape(3, NX)  # rows 3.. stay unwritten
    # v2: fill_value null, as xarray writes strings (a "" fill would mask "" as missing)
    root.create_array("name", data=np.array(["a", "bb", "", "dddd", "é"], dtype="T"),
                      fill_value=None, **dims(["x"]))
    if consolidated:
        cs.consolidate_metadata(path)


@pytest.mark.parametrize("consolidated", [False, True], ids=["plain", "consolidated"])
def test_written_by_chunkstore(tmp_path, fmt, consolidated):
    path = str(tmp_path / "cs.zarr")
    write_with_chunkstore(path, fmt, consolidated)
    ours = assert_same(path)
    assert ours.attrs == {"title": "by chunkstore"}
    np.testing.assert_array_equal(
        ours["time"].values, pd.date_range("2020-01-01", periods=NT, freq="6h").values)
    level = np.arange(NT * NX).reshape(NT, NX) * 7 * 0.5 + 10.0
    level[2, 3] = np.nan
    np.testing.assert_allclose(ours["level"].values, level)
    assert np.isnan(ours["temp"].values[3:]).all()
    assert ours["name"].values.tolist() == ["a", "bb", "", "dddd", "é"]
    assert_same(path, chunks={}, mask_and_scale=False, decode_times=False)


def test_to_zarr_then_chunkstore_edits(tmp_path, fmt):
    """A dataset written by to_zarr, then extended and re-attributed by chunkstore:
    both engines see the same new dataset."""
    path = to_zarr(make_dataset(), tmp_path / "e.zarr", fmt, consolidated=False)
    root = cs.open_group(path, mode="r+")
    root.attrs["edited"] = "by chunkstore"
    root["count"][1:3] = [70, 80]
    extra = root.create_array("extra", data=np.linspace(0, 1, NX), chunks=(2,),
                              **({"dimension_names": ["x"]} if fmt == 3 else
                                 {"attributes": {"_ARRAY_DIMENSIONS": ["x"]}}))
    extra.attrs["units"] = "1"
    ours = assert_same(path)
    assert ours.attrs["edited"] == "by chunkstore"
    assert ours["count"].values.tolist() == [0, 70, 80, 3, 4]
    assert ours["extra"].attrs == {"units": "1"}


# -- registration, detection, errors ------------------------------------------------------
def test_guess_can_open(tmp_path, written):
    entry = ChunkstoreBackendEntrypoint()
    assert entry.guess_can_open(written)
    assert entry.guess_can_open(written + "/")
    plain = tmp_path / "plain_dir"
    plain.mkdir()
    assert not entry.guess_can_open(str(plain))
    cs.group(str(plain / "v3"), zarr_format=3)
    cs.group(str(plain / "v2"), zarr_format=2)
    assert entry.guess_can_open(plain / "v3") and entry.guess_can_open(str(plain / "v2"))
    assert not entry.guess_can_open(str(tmp_path / "x.nc"))
    assert not entry.guess_can_open(b"bytes")
    assert entry.guess_can_open(cs.open_group(written, mode="r"))
    assert "chunkstore" in xr.backends.list_engines()
    assert xr.backends.plugins.guess_engine(written) == "chunkstore"
    xr.testing.assert_identical(
        xr.open_dataset(cs.open_group(written, mode="r"), engine="chunkstore").load(),
        make_dataset())


def test_missing_dimension_names_raise_like_zarr(tmp_path, fmt):
    path = str(tmp_path / "nodims.zarr")
    cs.group(path, zarr_format=fmt).create_array("a", data=np.arange(3))
    with pytest.raises(KeyError):
        xr.open_dataset(path, engine="zarr")
    with pytest.raises(KeyError, match="dimension"):
        xr.open_dataset(path, engine="chunkstore")


def test_never_imports_zarr(tmp_path):
    """A v2 and a v3 dataset opened and loaded in one fresh interpreter. The same
    interpreter first shows that ``import chunkstore`` does not import xarray, and
    ``chunkstore.xarray`` does (one interpreter start, not two)."""
    written = [to_zarr(make_dataset(), tmp_path / f"v{fmt}.zarr", fmt) for fmt in (2, 3)]
    code = (
        "import sys, chunkstore\n"
        "assert 'xarray' not in sys.modules, 'import chunkstore imported xarray'\n"
        "chunkstore.xarray.to_store\n"
        "assert 'xarray' in sys.modules, 'chunkstore.xarray did not import xarray'\n"
        "import xarray as xr\n"
        f"for path in {written!r}:\n"
        "    ds = xr.open_dataset(path, engine='chunkstore', chunks={})\n"
        "    ds.load()\n"
        "    assert 'zarr' not in sys.modules, 'zarr was imported'\n"
        "    print(ds.sizes['time'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(NT), str(NT)]
